// DeadlineKeeper: x-deadline on the source (precopy/deadline.h). It re-makes the plan from what
// is measured now during every round and at its end, and the strategy acts as soon as the plan
// misses the deadline: a cancel, the switch to postcopy, a higher downtime-limit, the throttle
// whose dirty rate meets it (during a round too), a dirty limit on the vCPUs.
// It keeps x-stall-timeout too (precopy/progress_watch.h): a precopy whose data left reaches no
// new low for that long has stalled, says so, and the same strategy acts.
#pragma once

#include <chrono>
#include <optional>

#include "vmm/migration/precopy/convergence.h"
#include "vmm/migration/precopy/deadline.h"
#include "vmm/migration/precopy/progress_watch.h"
#include "vmm/migration/session/source_core.h"
#include "vmm/migration/session/source_postcopy.h"

namespace vmm::migration {

class DeadlineKeeper {
public:
    DeadlineKeeper(SourceCore& core, PostcopyPhase& postcopy);

    // During a round: a cancel (failure()) or a switch at once when the plan misses it.
    void watch();
    // At a round's end: every strategy, with the round's measured bandwidth and what is dirty
    // (into `d`: a higher downtime-limit, a throttle step); an error when it cancels. A stall too.
    Status keep(Convergence& conv, Decision& d, uint64_t dirty_bytes);
    // Why the plan missed x-deadline under its cancel strategy, once it did.
    const std::optional<Error>& failure() const { return failure_; }

private:
    DeadlineFacts facts(const EtaFacts& eta, const Convergence* conv) const;
    // The strategy's action `a` (for x-deadline, or a `stall`), into `d` and `conv`.
    Status act(const DeadlineAction& a, bool stall, Convergence& conv, Decision& d);
    // A stall (`what`), told: the log, the statistics, the event.
    void stalled(const std::string& what, const DeadlineAction& a);
    // dirty-limit: every vCPU limited so that the guest dirties a.dirty_bytes_per_s in all.
    Status limit_dirty(const DeadlineAction& a, const char* why);

    SourceCore& core_;
    PostcopyPhase& postcopy_;
    uint64_t deadline_ms_ = 0;  // x-deadline, parsed (0: none)
    // x-deadline-strategy's list, parsed: the first, and those tried after it in turn
    DeadlineStrategy strategy_ = DeadlineStrategy::cancel;
    std::vector<DeadlineStrategy> then_;
    ProgressWatch progress_;    // x-stall-timeout
    std::optional<Error> failure_;
    std::chrono::steady_clock::time_point checked_;  // watch()'s last look
    // The last throttle step: the dirty rate the plan reads is measured over the sampler's
    // periods, so a step shows only in a whole period after it; the next waits for that.
    std::optional<std::chrono::steady_clock::time_point> throttled_at_;
    bool throttle_settling() const;
    // throttle, during a round: the vCPUs throttled to `percent` now (a raise: easing waits for a
    // round's end, act()).
    void throttle_now(uint32_t percent, const std::string& why);
    uint32_t throttle_ = 0;               // the throttle this set last, percent
    double planned_dirty_ = 0;            // the dirty rate (bytes/s) the last plan read
    std::optional<uint64_t> dirty_cap_;   // the vCPUs' dirty limit this set last, pages/s
};

}  // namespace vmm::migration
