// Convergence: the precopy controller's decisions, apart from any I/O so they can be tested.
// After each dirty round it is told the measured bandwidth and what is still dirty, and says
// whether to stop and copy the rest with the vCPUs paused, and how hard to throttle the vCPUs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "vmm/migration/transport/options.h"

namespace vmm::migration {

struct RoundFacts {
    uint64_t bytes_sent = 0;        // in the round that just ended
    double seconds = 0;             // its duration
    uint64_t dirty_bytes = 0;       // dirty now, to be sent next
};

struct Decision {
    bool complete = false;          // pause now and finish
    bool limit_unreachable = false; // the hand-over alone takes longer than downtime-limit
    uint32_t throttle_percent = 0;  // vCPU throttle to apply from now on
    double bandwidth = 0;           // bytes/s used for the decision
    double expected_downtime_ms = 0;
};

class Convergence {
public:
    // `handover_ms`: the fixed part of any downtime (saving and loading vCPU and device state,
    // as the destination rehearsed it); the RAM left must fit in what the limit leaves of it.
    Convergence(const Parameters& p, bool auto_converge, double handover_ms = 0)
        : params_(p), auto_converge_(auto_converge), handover_ms_(handover_ms) {}
    Decision after_round(const RoundFacts& f);
    uint32_t throttle() const { return throttle_; }
    // x-deadline (deadline.h): a higher downtime-limit from now on; one throttle step at once
    // (auto-converge's, whether or not it is on), returning the new percentage.
    void set_downtime_limit(uint64_t ms) { params_.downtime_limit_ms = ms; }
    uint32_t throttle_step();
    // x-deadline's throttle, set during a round or at its end: from now on at least `percent`
    // (at most max-cpu-throttle).
    void raise_throttle(uint32_t percent) {
        throttle_ = std::max(throttle_, std::min<uint32_t>(percent, static_cast<uint32_t>(params_.max_cpu_throttle)));
    }
    // x-deadline's throttle eased (deadline.h: throttle_to_ease), or held to the keeper's.
    void set_throttle(uint32_t percent) {
        throttle_ = std::min<uint32_t>(percent, static_cast<uint32_t>(params_.max_cpu_throttle));
    }
    bool throttle_at_most() const { return throttle_ >= params_.max_cpu_throttle; }

private:
    Parameters params_;
    bool auto_converge_;
    double handover_ms_;
    double bandwidth_ = 0;
    uint64_t stuck_rounds_ = 0;
    uint32_t throttle_ = 0;
};

}  // namespace vmm::migration
