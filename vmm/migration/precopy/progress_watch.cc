#include "vmm/migration/precopy/progress_watch.h"

#include <fmt/format.h>

namespace vmm::migration {

namespace {

DeadlineAction cancel_stalled(const std::string& what, std::string_view tried) {
    return {DeadlineAction::Kind::cancel, 0,
            fmt::format("x-stall-timeout: {}{}; the migration ends here and the guest runs on (raise x-stall-timeout, "
                        "or choose another x-deadline-strategy)",
                        what, tried)};
}

// The least downtime limit, up to the ceiling, at which the plan ends at all.
std::optional<uint64_t> least_ending_downtime(const DeadlineFacts& f) {
    return least_limit_ms(static_cast<uint64_t>(f.eta.downtime_limit_ms), f.max_downtime_ms, [&](uint64_t ms) {
        EtaFacts e = f.eta;
        e.downtime_limit_ms = static_cast<double>(ms);
        auto eta = precopy_eta(e);
        return eta && eta->converges;
    });
}

}  // namespace

bool ProgressWatch::stalled(uint64_t remaining, double now_ms) {
    if (timeout_ms_ == 0) return false;
    if (remaining < lowest_) {
        lowest_ = remaining;
        lowest_at_ms_ = now_ms;
        said_ = false;
        return false;
    }
    if (said_ || now_ms - lowest_at_ms_ < static_cast<double>(timeout_ms_)) return false;
    said_ = true;
    return true;
}

void ProgressWatch::restart(double now_ms) {
    lowest_at_ms_ = now_ms;
    said_ = false;
}

std::string ProgressWatch::describe(uint64_t remaining, double now_ms) const {
    constexpr double kMiB = 1024.0 * 1024.0;
    return fmt::format("no progress for {:.1f} s: {:.1f} MiB left, its lowest {:.1f} MiB at {:.1f} s",
                       (now_ms - lowest_at_ms_) / 1000, static_cast<double>(remaining) / kMiB,
                       static_cast<double>(lowest_) / kMiB, lowest_at_ms_ / 1000);
}

namespace {

// What one strategy does about a stall; nothing, with what it could not do added to `tried`,
// when it cannot act (cancel never can: the list ends there).
std::optional<DeadlineAction> one_stall_action(const DeadlineFacts& f, std::string& tried) {
    switch (f.strategy) {
        case DeadlineStrategy::cancel: return std::nullopt;
        case DeadlineStrategy::postcopy: return DeadlineAction{DeadlineAction::Kind::postcopy, 0, {}};
        case DeadlineStrategy::downtime:
            if (auto ms = least_ending_downtime(f)) return DeadlineAction{DeadlineAction::Kind::downtime, *ms, {}};
            tried += fmt::format("; not even a downtime of {} ms (x-deadline-max-downtime) would end it", f.max_downtime_ms);
            return std::nullopt;
        case DeadlineStrategy::throttle:
            if (!f.throttle_at_most) return DeadlineAction{DeadlineAction::Kind::throttle, 0, {}};
            tried += "; the vCPUs are throttled as far as max-cpu-throttle allows";
            return std::nullopt;
        case DeadlineStrategy::cheapest: {  // no deadline to weigh them by: the pause that ends it, else a step
            DeadlineFacts one = f;
            one.strategy = DeadlineStrategy::downtime;
            if (auto a = one_stall_action(one, tried)) return a;
            one.strategy = DeadlineStrategy::throttle;
            return one_stall_action(one, tried);
        }
        case DeadlineStrategy::dirty_limit:  // no deadline to aim at: half the rate that stalled
            if (!f.dirty_limit_at_most) return DeadlineAction{DeadlineAction::Kind::dirty_limit, 0, {}, f.eta.dirty_bytes_per_s / 2};
            tried += "; the vCPUs over their dirty limit are throttled as far as they go";
            return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace

DeadlineAction stall_action(const DeadlineFacts& f, const std::string& what) {
    std::string tried;
    DeadlineFacts one = f;
    for (size_t i = 0; i <= f.then.size(); ++i) {
        one.strategy = i == 0 ? f.strategy : f.then[i - 1];
        if (auto a = one_stall_action(one, tried)) return *a;
    }
    return cancel_stalled(what, tried);
}

}  // namespace vmm::migration
