// What MigrationSource's rounds share (source.cc, source_postcopy.cc): the connection, the
// working stats, the rate limiter and the RAM saver. Private to the session.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/core/rate_limiter.h"
#include "vmm/migration/session/source.h"

namespace vmm::migration {

// The pages of each of `mem`'s blocks (source_resume.cc).
std::vector<uint64_t> pages_per_block(const memory::GuestMemory& mem);
// How often a source whose link broke tries again (a resumption, or asking after GO).
inline constexpr auto kReconnectEvery = std::chrono::milliseconds(100);

struct MigrationSource::Run {
    Run(MigrationSource& src, Connection& c)
        : conn(&c),
          limiter(src.live_->reader(Live::max_bandwidth), RateLimiter::cancellable_sleep(src.cancel_)),
          saver(src.machine_.memory(), c.stream(), c.source_ram(), limiter, src.options_.caps.zero_blocks, work,
                src.verify_, src.summer_) {}
    Connection* conn;  // the live one: a resumed precopy's replaces the broken one's
    RamStats work;
    RateLimiter limiter;
    RamSaver saver;
    uint32_t round = 0;
    // A resumed precopy's first round: what did not arrive whole (resume.h), sent with the dirty log.
    std::optional<std::vector<std::vector<uint64_t>>> resend;
};

}  // namespace vmm::migration
