// DeadlineKeeper (source_deadline.h).
#include "vmm/migration/session/source_deadline.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "vmm/common/log.h"
#include "vmm/machine/dirty_limit.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::migration {

namespace {
// How often a round looks at its plan (the rates it reads move once a second or so).
constexpr auto kLookEvery = std::chrono::milliseconds(200);
// dirty-limit's lowest limit per vCPU, pages/s (64 KiB/s: below QEMU's 1 MB/s, which a link of
// a few MB/s shared by several vCPUs needs); and how much tighter each further step is than the
// last when the plan still misses.
constexpr uint64_t kDirtyLimitFloor = 16;
constexpr double kDirtyLimitStep = 0.75;
// How long the precopy runs before watch() trusts its measured link rate enough to throttle.
constexpr auto kMeasuredFor = std::chrono::seconds(2);
constexpr const char* kEased = "x-deadline: the plan meets it with a lower throttle";

// A log line's tail for why the strategy chose `a` (cheapest's weighing), if it says.
std::string and_why(const DeadlineAction& a) { return a.why.empty() ? std::string() : "; " + a.why; }
}  // namespace

DeadlineKeeper::DeadlineKeeper(SourceCore& core, PostcopyPhase& postcopy)
    : core_(core), postcopy_(postcopy), progress_(core.options.params.stall_timeout_ms) {
    // Checked when it was set: "off" or a duration.
    if (auto d = parse_deadline_ms(core_.options.params.deadline)) deadline_ms_ = *d;
    // Checked when it was set: a list of strategies in the order to try them.
    if (auto list = parse_deadline_strategies(core_.options.params.deadline_strategy); list && !list->empty()) {
        strategy_ = list->front();
        then_.assign(list->begin() + 1, list->end());
    }
}

DeadlineFacts DeadlineKeeper::facts(const EtaFacts& eta, const Convergence* conv) const {
    DeadlineFacts f;
    f.deadline_ms = deadline_ms_;
    f.strategy = strategy_;
    f.then = then_;
    f.max_downtime_ms = core_.options.params.deadline_max_downtime_ms;
    f.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - core_.start).count();
    f.eta = eta;
    f.throttle_percent = std::max(throttle_, conv != nullptr ? conv->throttle() : 0u);
    f.min_throttle_percent = static_cast<uint32_t>(core_.options.params.cpu_throttle_initial);
    f.max_throttle_percent = static_cast<uint32_t>(core_.options.params.max_cpu_throttle);
    f.throttle_at_most = f.throttle_percent >= f.max_throttle_percent;
    f.dirty_limit_at_most = dirty_cap_ && *dirty_cap_ <= kDirtyLimitFloor;
    f.postcopy_bytes_per_s = static_cast<double>(core_.live ? core_.live->get(Live::max_postcopy_bandwidth)
                                                            : core_.options.params.max_postcopy_bandwidth);
    return f;
}

// During a round: the plan as the monitor shows it (predict()).
void DeadlineKeeper::watch() {
    auto now = std::chrono::steady_clock::now();
    if (deadline_ms_ == 0 || failure_ || postcopy_.requested() || now - checked_ < kLookEvery) return;
    checked_ = now;
    EtaFacts eta;
    std::chrono::steady_clock::time_point active_since;
    {
        std::lock_guard lock(core_.mutex);
        eta = core_.precopy_facts(core_.stats);
        active_since = core_.active_since;
    }
    // throttle acts during a round too (a bulk round may be most of the time there is), once the
    // link has been measured for a while (a slow start measures it at a fraction) and the last
    // step has shown in the dirty rate. downtime and dirty-limit act at a round's end, with the
    // round's measured bandwidth and what is dirty then, and so do the strategies listed after them.
    DeadlineFacts f = facts(eta, nullptr);
    f.during_round = true;
    f.throttle_waits = throttle_settling() || now - active_since < kMeasuredFor;
    DeadlineAction a = deadline_action(f);
    switch (a.kind) {
        case DeadlineAction::Kind::cancel: failure_ = Error(a.why); break;
        case DeadlineAction::Kind::throttle:
            throttle_now(a.throttle_percent, "x-deadline: the plan misses it" + and_why(a));
            break;
        case DeadlineAction::Kind::postcopy:
            log::info("x-deadline: the plan misses it; switching to postcopy now");
            postcopy_.switch_soon();
            break;
        default: break;  // an ease waits for the round's end (deadline.h, throttle_to_ease)
    }
}

// At a round's end: every strategy, with the round's measured bandwidth and what is dirty; and
// x-stall-timeout, which reads what is dirty at each round's end.
bool DeadlineKeeper::throttle_settling() const {
    if (!throttled_at_) return false;
    auto period = std::chrono::milliseconds(core_.machine.spec().dirty_sample_ms);
    return std::chrono::steady_clock::now() - *throttled_at_ < 2 * period;
}

void DeadlineKeeper::throttle_now(uint32_t percent, const std::string& why) {
    throttle_ = percent;
    core_.machine.vcpus().set_throttle(throttle_);
    throttled_at_ = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(core_.mutex);
        core_.stats.cpu_throttle_percentage = throttle_;
    }
    log::info("{}; the vCPUs throttled to {} %", why, throttle_);
}

Status DeadlineKeeper::keep(Convergence& conv, Decision& d, uint64_t dirty_bytes) {
    // What a round's watch() set holds from now on: the throttle is this keeper's alone, unless
    // auto-converge steps it too (then it is never lower than either asks).
    if (core_.options.caps.auto_converge) {
        conv.raise_throttle(throttle_);
    } else {
        conv.set_throttle(throttle_);
    }
    d.throttle_percent = conv.throttle();
    if (d.complete || postcopy_.requested() || (deadline_ms_ == 0 && !progress_.on())) return {};
    EtaFacts eta;
    {
        std::lock_guard lock(core_.mutex);
        eta = core_.precopy_facts(core_.stats);
    }
    eta.link_bytes_per_s = d.bandwidth;
    eta.remaining_bytes = dirty_bytes;
    DeadlineFacts f = facts(eta, &conv);
    if (auto passed = deadline_passed(f); passed.kind == DeadlineAction::Kind::cancel) return Error(passed.why);
    // A throttle step's effect is not measured yet: neither another step nor a verdict on it
    // (every round stepped at once, a guest went from 20 to 99 % in 4.8 s, cancelled on the rate
    // it had before the first).
    if (throttle_settling()) return {};
    planned_dirty_ = f.eta.dirty_bytes_per_s;
    DeadlineAction a = deadline_action(f);
    bool stall = false;
    if (a.kind == DeadlineAction::Kind::none && progress_.stalled(dirty_bytes, f.elapsed_ms)) {
        std::string what = progress_.describe(dirty_bytes, f.elapsed_ms);
        a = stall_action(f, what);
        stalled(what, a);
        progress_.restart(f.elapsed_ms);  // what the strategy does gets its own time to show
        stall = true;
    }
    return act(a, stall, conv, d);
}

void DeadlineKeeper::stalled(const std::string& what, const DeadlineAction& a) {
    const char* action = a.kind == DeadlineAction::Kind::cancel        ? "cancel"
                         : a.kind == DeadlineAction::Kind::postcopy    ? "postcopy"
                         : a.kind == DeadlineAction::Kind::downtime    ? "downtime"
                         : a.kind == DeadlineAction::Kind::dirty_limit ? "dirty-limit"
                                                                       : "throttle";
    log::warn("the migration to {} has stalled ({}); x-deadline-strategy: {}", core_.uri.text, what, action);
    {
        std::lock_guard lock(core_.mutex);
        ++core_.stats.stalls;
    }
    if (core_.on_stall && core_.options.caps.events) core_.on_stall({progress_.lowest(), what, action});
}

Status DeadlineKeeper::act(const DeadlineAction& a, bool stall, Convergence& conv, Decision& d) {
    const char* why = stall ? "x-stall-timeout: no progress" : "x-deadline: the plan misses it";
    switch (a.kind) {
        case DeadlineAction::Kind::none: return {};
        case DeadlineAction::Kind::cancel: return Error(a.why);
        case DeadlineAction::Kind::postcopy:
            log::info("{}; switching to postcopy now", why);
            postcopy_.switch_soon();
            return {};
        case DeadlineAction::Kind::downtime:
            log::info("{}: downtime-limit raised from {} to {} ms, the least that {}{}", stall ? "x-stall-timeout" : "x-deadline",
                      core_.options.params.downtime_limit_ms, a.downtime_ms, stall ? "ends it" : "meets it", and_why(a));
            {
                std::lock_guard lock(core_.mutex);  // stats() reads it for the time left
                core_.options.params.downtime_limit_ms = a.downtime_ms;
            }
            conv.set_downtime_limit(a.downtime_ms);
            // The round just measured fits the new limit already, or the next will.
            d.complete = d.expected_downtime_ms <= static_cast<double>(a.downtime_ms);
            return {};
        case DeadlineAction::Kind::throttle:
            if (a.throttle_percent == 0) {
                (void)conv.throttle_step();  // a stall: no deadline to aim at, one step
            } else {
                conv.raise_throttle(a.throttle_percent);
            }
            d.throttle_percent = conv.throttle();
            throttle_ = d.throttle_percent;
            throttled_at_ = std::chrono::steady_clock::now();
            log::info("{}; the vCPUs throttled to {} %{}", why, d.throttle_percent, and_why(a));
            return {};
        case DeadlineAction::Kind::ease:
            if (core_.options.caps.auto_converge) return {};  // auto-converge's steps are not ours to take back
            conv.set_throttle(a.throttle_percent);
            d.throttle_percent = conv.throttle();
            throttle_ = d.throttle_percent;
            throttled_at_ = std::chrono::steady_clock::now();
            log::info("{}; the vCPUs eased to {} %", kEased, d.throttle_percent);
            return {};
        case DeadlineAction::Kind::dirty_limit: return limit_dirty(a, why);
    }
    return {};
}

Status DeadlineKeeper::limit_dirty(const DeadlineAction& a, const char* why) {
    auto limiter = core_.machine.dirty_limiter();
    if (!limiter) return limiter.error();  // refused at 'migrate' already (MigrationManager)
    // The plan's rate and the vCPUs' are measured over different windows: the guest is held to
    // the plan's share of what its vCPUs would dirty unthrottled.
    std::vector<double> rates = (*limiter)->unthrottled_rates();
    double sum = std::accumulate(rates.begin(), rates.end(), 0.0);
    double share = planned_dirty_ > 0 ? std::clamp(a.dirty_bytes_per_s / planned_dirty_, 0.0, 1.0) : 0.5;
    auto cap = machine::common_cap(rates, share * sum);
    double per_vcpu = cap ? *cap : a.dirty_bytes_per_s / memory::kPageSize / static_cast<double>(std::max<size_t>(rates.size(), 1));
    auto pages = std::max(kDirtyLimitFloor, static_cast<uint64_t>(per_vcpu));
    // Missed again: tighter than the last step, whatever the rates read, until the floor.
    if (dirty_cap_) pages = std::max(kDirtyLimitFloor, std::min(pages, static_cast<uint64_t>(*dirty_cap_ * kDirtyLimitStep)));
    if (auto s = (*limiter)->set(std::nullopt, pages); !s) return s;
    core_.dirty_limited = true;
    dirty_cap_ = pages;
    throttled_at_ = std::chrono::steady_clock::now();  // its effect shows a period later
    double dirtiest = rates.empty() ? 0 : *std::max_element(rates.begin(), rates.end());
    constexpr double kMiB = 1024.0 * 1024.0;
    log::info("{}; every vCPU's dirty rate limited to {:.2f} MB/s (the guest held to {:.2f} MB/s in all; unthrottled, "
              "its dirtiest vCPU would dirty {:.1f} MB/s)",
              why, static_cast<double>(pages * memory::kPageSize) / kMiB, a.dirty_bytes_per_s / kMiB,
              dirtiest * memory::kPageSize / kMiB);
    return {};
}

}  // namespace vmm::migration
