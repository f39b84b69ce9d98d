// x-deadline on the source (precopy/deadline.h): the plan, re-made from what is measured now,
// during every round and at its end; the strategy acts as soon as the plan misses the deadline.
#include <fmt/format.h>

#include "vmm/common/log.h"
#include "vmm/memory/guest_memory.h"
#include "vmm/migration/session/source.h"
#include "vmm/migration/session/source_run.h"

namespace vmm::migration {

namespace {
// How often a round looks at its plan (the rates it reads move once a second or so).
constexpr auto kLookEvery = std::chrono::milliseconds(200);
}  // namespace

DeadlineFacts MigrationSource::deadline_facts(double link_bytes_per_s, uint64_t left_bytes, const Convergence* conv) const {
    DeadlineFacts f;
    f.deadline_ms = deadline_ms_;
    f.strategy = deadline_strategy_named(options_.params.deadline_strategy).value_or(DeadlineStrategy::cancel);
    f.max_downtime_ms = options_.params.deadline_max_downtime_ms;
    f.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    f.eta = {left_bytes, link_bytes_per_s, machine_.dirty_rate().rate().pages_per_second * memory::kPageSize,
             static_cast<double>(options_.params.downtime_limit_ms), stats().handover_estimate_ms};
    f.throttle_at_most = conv != nullptr && conv->throttle_at_most();
    return f;
}

// During a round: the link's rate and what is left as the monitor shows them (MigrationStats::eta).
void MigrationSource::watch_deadline(Run& run) {
    (void)run;
    auto now = std::chrono::steady_clock::now();
    if (deadline_ms_ == 0 || deadline_failure_ || postcopy_requested_ || now - deadline_checked_ < kLookEvery) return;
    deadline_checked_ = now;
    MigrationStats s = stats();
    if (!s.eta) return;
    auto a = deadline_action(deadline_facts(s.eta_link_bytes_per_s, s.rounds == 0 ? s.ram.bulk_to_send : s.ram.remaining,
                                            nullptr));
    if (a.kind == DeadlineAction::Kind::cancel) {
        deadline_failure_ = Error(a.why);
    } else if (a.kind == DeadlineAction::Kind::postcopy) {
        log::info("x-deadline: the plan misses it; switching to postcopy now");
        postcopy_requested_ = true;
    }
}

// At a round's end: every strategy, with the round's measured bandwidth and what is dirty.
Status MigrationSource::keep_deadline(Run& run, Convergence& conv, Decision& d, uint64_t dirty_bytes) {
    (void)run;
    if (deadline_ms_ == 0 || d.complete || postcopy_requested_) return {};
    auto a = deadline_action(deadline_facts(d.bandwidth, dirty_bytes, &conv));
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
            options_.params.downtime_limit_ms = a.downtime_ms;
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
