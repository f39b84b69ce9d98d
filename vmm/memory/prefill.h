// Prefill: the VMM writes incompressible bytes into guest RAM from the host side, for
// benchmarks (guest code may be slow on some hosts, and a benchmark must not depend on it).
#pragma once

#include <cstdint>

#include "vmm/common/result.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::memory {

// Fills the first `bytes` of guest RAM (blocks in order) with pseudo-random data from `seed`,
// marking it dirty. Fails if the guest has less RAM than that.
Status prefill_random(const GuestMemory& mem, uint64_t bytes, uint64_t seed);

}  // namespace vmm::memory
