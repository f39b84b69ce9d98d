#include "vmm/migration/precopy/convergence.h"

#include <algorithm>

namespace vmm::migration {

Decision Convergence::after_round(const RoundFacts& f) {
    // Bandwidth measured in this migration: the last round that moved enough to time it.
    if (f.seconds > 0.001 && f.bytes_sent >= 64 * 1024) bandwidth_ = static_cast<double>(f.bytes_sent) / f.seconds;
    Decision d;
    d.bandwidth = bandwidth_;
    // The RAM left gets what the limit leaves of the hand-over. When the hand-over alone takes
    // longer, waiting cannot help: the RAM left is held to the whole limit, as before, and the
    // decision says the limit cannot be met.
    double limit = static_cast<double>(params_.downtime_limit_ms);
    d.limit_unreachable = handover_ms_ >= limit;
    double ram_budget = d.limit_unreachable ? limit : limit - handover_ms_;
    d.expected_downtime_ms = handover_ms_;
    if (f.dirty_bytes == 0) {
        d.complete = true;
    } else if (bandwidth_ > 0) {
        double ram_ms = static_cast<double>(f.dirty_bytes) * 1000.0 / bandwidth_;
        d.expected_downtime_ms += ram_ms;
        d.complete = ram_ms <= ram_budget;
    }
    // Not converging: the guest dirtied more than half of what we managed to send (QEMU's test).
    if (!d.complete && auto_converge_ && f.dirty_bytes * 2 > f.bytes_sent) {
        if (++stuck_rounds_ >= params_.throttle_after_rounds) {
            stuck_rounds_ = 0;
            uint64_t next = throttle_ == 0 ? params_.cpu_throttle_initial : throttle_ + params_.cpu_throttle_increment;
            throttle_ = static_cast<uint32_t>(std::min<uint64_t>(next, params_.max_cpu_throttle));
        }
    }
    d.throttle_percent = throttle_;
    return d;
}

uint32_t Convergence::throttle_step() {
    uint64_t next = throttle_ == 0 ? params_.cpu_throttle_initial : throttle_ + params_.cpu_throttle_increment;
    throttle_ = static_cast<uint32_t>(std::min<uint64_t>(next, params_.max_cpu_throttle));
    stuck_rounds_ = 0;
    return throttle_;
}

}  // namespace vmm::migration
