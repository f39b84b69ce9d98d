// for_each_parallel: `count` independent pieces of work shared by a few threads, each taking
// the next piece as it finishes one. What a file restore reads, places and checks in parallel:
// most of its time is the kernel zeroing each fresh page as it is first written, which runs on
// the CPU that writes it, so more threads take less time (up to the cores there are).
#pragma once

#include <cstddef>
#include <functional>

#include "vmm/common/result.h"

namespace vmm {

// Runs `piece(index, worker)` for every index in [0, count) on `workers` threads (the caller's
// among them; worker is 0 .. workers-1, for state kept per thread). After a failure no new
// piece starts; the failure of the lowest index is returned, so the error does not depend on
// which thread got there first. An exception a piece throws is that piece's failure.
Status for_each_parallel(size_t count, unsigned workers, const std::function<Status(size_t index, unsigned worker)>& piece);

// Threads worth using for work that scales with cores: the cores there are, at most `cap`.
unsigned worker_count(unsigned cap);

}  // namespace vmm
