#include "vmm/migration/convergence.h"

#include <algorithm>

namespace vmm::migration {

Decision Convergence::after_round(const RoundFacts& f) {
    // Bandwidth measured in this migration: the last round that moved enough to time it.
    if (f.seconds > 0.001 && f.bytes_sent >= 64 * 1024) bandwidth_ = static_cast<double>(f.bytes_sent) / f.seconds;
    Decision d;
    d.bandwidth = bandwidth_;
    if (f.dirty_bytes == 0) {
        d.complete = true;
    } else if (bandwidth_ > 0) {
        d.expected_downtime_ms = static_cast<double>(f.dirty_bytes) * 1000.0 / bandwidth_;
        d.complete = d.expected_downtime_ms <= static_cast<double>(params_.downtime_limit_ms);
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

}  // namespace vmm::migration
