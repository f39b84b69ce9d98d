// What an outgoing migration's rounds share (source.cc and its phases): the connection, the
// working stats, the rate limiter and the RAM saver. Private to the session.
#pragma once

#include <optional>
#include <vector>

#include "vmm/migration/core/rate_limiter.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/session/source_core.h"

namespace vmm::migration {

struct SourceRun {
    SourceRun(SourceCore& core, Connection& c)
        : conn(&c),
          limiter(core.live->reader(Live::max_bandwidth), RateLimiter::cancellable_sleep(core.cancel)),
          saver(core.machine.memory(), c.stream(), c.source_ram(), limiter, core.options.caps.zero_blocks, work,
                core.verify, core.summer) {
        saver.wait_for_landing(core.round_landed);
    }
    Connection* conn;  // the live one: a resumed precopy's replaces the broken one's
    RamStats work;
    RateLimiter limiter;
    RamSaver saver;
    uint32_t round = 0;
    // A resumed precopy's first round: what did not arrive whole (resume.h), sent with the dirty log.
    std::optional<std::vector<std::vector<uint64_t>>> resend;
};

}  // namespace vmm::migration
