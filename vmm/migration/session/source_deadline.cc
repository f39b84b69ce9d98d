// x-deadline on the source (precopy/deadline.h): the plan, re-made from what is measured now,
// during every round and at its end; the strategy acts as soon as the plan misses the deadline.
#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/migration/session/source.h"

namespace vmm::migration {

namespace {
// How often a round looks at its plan (the rates it reads move once a second or so).
constexpr auto kLookEvery = std::chrono::milliseconds(200);
}  // namespace

DeadlineFacts MigrationSource::deadline_facts(const EtaFacts& eta, const Convergence* conv) const {
    DeadlineFacts f;
    f.deadline_ms = deadline_ms_;
    f.strategy = deadline_strategy_named(options_.params.deadline_strategy).value_or(DeadlineStrategy::cancel);
    f.max_downtime_ms = options_.params.deadline_max_downtime_ms;
    f.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    f.eta = eta;
    f.throttle_at_most = conv != nullptr && conv->throttle_at_most();
    return f;
}

// During a round: the plan as the monitor shows it (predict()).
void MigrationSource::watch_deadline() {
    auto now = std::chrono::steady_clock::now();
    if (deadline_ms_ == 0 || deadline_failure_ || postcopy_requested_ || now - deadline_checked_ < kLookEvery) return;
    deadline_checked_ = now;
    EtaFacts eta;
    {
        std::lock_guard lock(mutex_);
        eta = precopy_facts(stats_);
    }
    auto a = deadline_action(deadline_facts(eta, nullptr));
    if (a.kind == DeadlineAction::Kind::cancel) {
        deadline_failure_ = Error(a.why);
    } else if (a.kind == DeadlineAction::Kind::postcopy) {
        log::info("x-deadline: the plan misses it; switching to postcopy now");
        postcopy_requested_ = true;
    }
}

// At a round's end: every strategy, with the round's measured bandwidth and what is dirty.
Status MigrationSource::keep_deadline(Convergence& conv, Decision& d, uint64_t dirty_bytes) {
    if (deadline_ms_ == 0 || d.complete || postcopy_requested_) return {};
    EtaFacts eta;
    {
        std::lock_guard lock(mutex_);
        eta = precopy_facts(stats_);
    }
    eta.link_bytes_per_s = d.bandwidth;
    eta.remaining_bytes = dirty_bytes;
    auto a = deadline_action(deadline_facts(eta, &conv));
    switch (a.kind) {
        case DeadlineAction::Kind::none: return {};
        case DeadlineAction::Kind::cancel: return Error(a.why);
        case DeadlineAction::Kind::postcopy:
            log::info("x-deadline: the plan misses it; switching to postcopy now");
            postcopy_requested_ = true;
            return {};
        case DeadlineAction::Kind::downtime:
            log::info("x-deadline: downtime-limit raised from {} to {} ms, the least that meets it",
                      options_.params.downtime_limit_ms, a.downtime_ms);
            {
                std::lock_guard lock(mutex_);  // stats() reads it for the time left
                options_.params.downtime_limit_ms = a.downtime_ms;
            }
            conv.set_downtime_limit(a.downtime_ms);
            // The round just measured fits the new limit already, or the next will.
            d.complete = d.expected_downtime_ms <= static_cast<double>(a.downtime_ms);
            return {};
        case DeadlineAction::Kind::throttle:
            d.throttle_percent = conv.throttle_step();
            log::info("x-deadline: the plan misses it; the vCPUs throttled to {} %", d.throttle_percent);
            return {};
    }
    return {};
}

}  // namespace vmm::migration
