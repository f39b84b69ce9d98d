#include "vmm/migration/precopy/deadline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "vmm/common/units.h"

namespace vmm::migration {

namespace {

constexpr std::array<std::pair<std::string_view, DeadlineStrategy>, 6> kStrategies{{
    {"cancel", DeadlineStrategy::cancel},
    {"postcopy", DeadlineStrategy::postcopy},
    {"downtime", DeadlineStrategy::downtime},
    {"throttle", DeadlineStrategy::throttle},
    {"dirty-limit", DeadlineStrategy::dirty_limit},
    {"cheapest", DeadlineStrategy::cheapest},
}};

constexpr uint64_t kTenYearsMs = uint64_t{10} * 366 * 24 * 3600 * 1000;

// "45.2 s more predicted" or "no end at these rates (...)".
std::string predicted(const DeadlineFacts& f, const std::optional<Eta>& eta) {
    if (eta && eta->converges) {
        return fmt::format("{:.1f} s in, {:.1f} s more predicted", f.elapsed_ms / 1000, eta->remaining_ms / 1000);
    }
    return fmt::format("{:.1f} s in, and no end at these rates (the guest dirties {:.1f} MB/s, the link moves {:.1f} MB/s)",
                       f.elapsed_ms / 1000, f.eta.dirty_bytes_per_s / 1e6, f.eta.link_bytes_per_s / 1e6);
}

bool ends_by(const DeadlineFacts& f, const std::optional<Eta>& eta, double by_ms) {
    return eta && eta->converges && f.elapsed_ms + eta->remaining_ms <= by_ms;
}

bool meets(const DeadlineFacts& f, const std::optional<Eta>& eta) {
    return ends_by(f, eta, static_cast<double>(f.deadline_ms));
}

DeadlineAction cancel(const DeadlineFacts& f, const std::optional<Eta>& eta, std::string_view tried) {
    return {DeadlineAction::Kind::cancel, 0,
            fmt::format("x-deadline {:.1f} s cannot be met: {}{}; the migration ends here and the guest runs on "
                        "(raise x-deadline, or choose another x-deadline-strategy)",
                        static_cast<double>(f.deadline_ms) / 1000, predicted(f, eta), tried)};
}

// The least downtime limit, up to the ceiling, whose prediction ends by `by_ms`.
std::optional<uint64_t> least_downtime_by(const DeadlineFacts& f, double by_ms) {
    return least_limit_ms(static_cast<uint64_t>(f.eta.downtime_limit_ms), f.max_downtime_ms, [&](uint64_t ms) {
        EtaFacts e = f.eta;
        e.downtime_limit_ms = static_cast<double>(ms);
        return ends_by(f, precopy_eta(e), by_ms);
    });
}

// The least limit that ends the migration by kDowntimeMargin of the time left, or, when the
// ceiling allows none, by the deadline itself.
std::optional<uint64_t> least_downtime(const DeadlineFacts& f) {
    double deadline = static_cast<double>(f.deadline_ms);
    if (auto ms = least_downtime_by(f, f.elapsed_ms + kDowntimeMargin * (deadline - f.elapsed_ms))) return ms;
    return least_downtime_by(f, deadline);
}

// Whether the postcopy push of what is left, switched to now, would itself end past the deadline:
// then what it would take ("; not even postcopy now would: ..."), else nothing.
std::optional<std::string> postcopy_misses(const DeadlineFacts& f) {
    double rate = f.postcopy_bytes_per_s > 0 ? f.postcopy_bytes_per_s : f.eta.link_bytes_per_s;
    auto push = postcopy_eta(f.eta.remaining_bytes, rate);
    if (!push || f.elapsed_ms + push->remaining_ms <= static_cast<double>(f.deadline_ms)) return std::nullopt;
    double left_ms = static_cast<double>(f.deadline_ms) - f.elapsed_ms;
    std::string faster = left_ms > 0 ? fmt::format(", or a push of {}/s", format_size(static_cast<uint64_t>(
                                                                               f.eta.remaining_bytes / (left_ms / 1000))))
                                     : std::string();
    return fmt::format("; not even postcopy now would: its push of {} at {}/s ({}) takes {:.1f} s; x-deadline {:.0f} s "
                       "would meet it{}",
                       format_size(f.eta.remaining_bytes), format_size(static_cast<uint64_t>(rate)),
                       f.postcopy_bytes_per_s > 0 ? "max-postcopy-bandwidth" : "the link's rate", push->remaining_ms / 1000,
                       std::ceil((f.elapsed_ms + push->remaining_ms) / 1000), faster);
}

// What the vCPUs would dirty unthrottled: the rate read, over the share of time they ran.
double unthrottled_rate(const DeadlineFacts& f) {
    return f.eta.dirty_bytes_per_s / (1.0 - std::min(f.throttle_percent, 99u) / 100.0);
}

// The throttle, percent, at which vCPUs that dirty `unthrottled` bytes/s dirty at most `rate`.
uint32_t throttle_for(double unthrottled, double rate) {
    if (unthrottled <= rate) return 0;
    return static_cast<uint32_t>(std::ceil(100.0 * (1.0 - rate / unthrottled)));
}

// x-deadline-strategy's list as the user typed it ("downtime,throttle").
std::string list_named(const DeadlineFacts& f) {
    std::string names = to_string(f.strategy);
    for (auto s : f.then) names += std::string(",") + to_string(s);
    return names;
}

bool acts_during_round(DeadlineStrategy s) {
    return s != DeadlineStrategy::downtime && s != DeadlineStrategy::dirty_limit;
}

// During a round, whether what a strategy chose (`a`; none: it cannot meet it now) waits for the
// round's end: a pause or a dirty limit acts there, with what is dirty then, and so may cheapest's
// pause where nothing meets it now; a throttle waits while its last step shows.
bool waits_for_rounds_end(DeadlineStrategy s, const std::optional<DeadlineAction>& a, const DeadlineFacts& f) {
    if (!a) return s == DeadlineStrategy::cheapest;
    using Kind = DeadlineAction::Kind;
    return a->kind == Kind::downtime || a->kind == Kind::dirty_limit || (a->kind == Kind::throttle && f.throttle_waits);
}

// What a name in the list stands for: cheapest is downtime and throttle, the cheaper first.
std::vector<DeadlineStrategy> stands_for(DeadlineStrategy s) {
    if (s == DeadlineStrategy::cheapest) return {DeadlineStrategy::downtime, DeadlineStrategy::throttle};
    return {s};
}

// Whether the list holds `s`, by name or through cheapest.
bool lists(const std::vector<DeadlineStrategy>& list, DeadlineStrategy s) {
    return std::any_of(list.begin(), list.end(), [s](DeadlineStrategy named) {
        auto covers = stands_for(named);
        return named == s || std::find(covers.begin(), covers.end(), s) != covers.end();
    });
}

}  // namespace

std::optional<double> highest_dirty_rate(const DeadlineFacts& f) {
    auto at = [&](double rate) {
        EtaFacts e = f.eta;
        e.dirty_bytes_per_s = rate;
        return precopy_eta(e);
    };
    if (!meets(f, at(0))) return std::nullopt;
    // meets(at(lo)); at(hi) misses, unless even the link's rate meets it (a tail the downtime
    // limit takes at once).
    double lo = 0, hi = std::max({f.eta.dirty_bytes_per_s, f.eta.link_bytes_per_s, 1.0});
    if (meets(f, at(hi))) return hi * kDirtyLimitMargin;
    for (int i = 0; i < 40 && hi - lo > 1.0; ++i) {
        double mid = lo + (hi - lo) / 2;
        (meets(f, at(mid)) ? lo : hi) = mid;
    }
    return lo * kDirtyLimitMargin;
}

std::optional<uint32_t> throttle_that_meets(const DeadlineFacts& f, std::string& why) {
    if (f.throttle_at_most) {
        why = "; the vCPUs are throttled as far as max-cpu-throttle allows";
        return std::nullopt;
    }
    auto rate = highest_dirty_rate(f);
    if (!rate) {
        why = "; not even a guest that dirtied nothing would meet it";
        return std::nullopt;
    }
    double unthrottled = unthrottled_rate(f);
    uint32_t t = std::max({throttle_for(unthrottled, *rate), f.min_throttle_percent, f.throttle_percent + 1});
    if (t > f.max_throttle_percent) {
        why = fmt::format("; not even max-cpu-throttle {} % would: the guest would still dirty {:.1f} MB/s, and at most "
                          "{:.1f} MB/s meets it",
                          f.max_throttle_percent, unthrottled * (1.0 - f.max_throttle_percent / 100.0) / 1e6, *rate / 1e6);
        return std::nullopt;
    }
    return t;
}

std::optional<double> guest_cost_ms(const EtaFacts& e, uint32_t throttle_percent) {
    auto eta = precopy_eta(e);
    if (!eta || !eta->converges) return std::nullopt;
    double rounds_ms = std::max(0.0, eta->remaining_ms - eta->downtime_ms);
    return std::min(throttle_percent, 100u) / 100.0 * rounds_ms + eta->downtime_ms;
}

std::optional<uint32_t> throttle_to_ease(const DeadlineFacts& f) {
    bool throttles = lists({f.strategy}, DeadlineStrategy::throttle) || lists(f.then, DeadlineStrategy::throttle);
    if (!throttles || f.throttle_percent == 0) return std::nullopt;
    auto rate = highest_dirty_rate(f);
    if (!rate) return std::nullopt;
    uint32_t wanted = throttle_for(unthrottled_rate(f), *rate);
    uint32_t half = f.throttle_percent / 2;  // at most halved at once, but a small one comes off whole
    uint32_t t = half < kThrottleEaseStep ? wanted : std::max(wanted, half);
    if (t + kThrottleEaseStep > f.throttle_percent) return std::nullopt;
    return t;
}

std::optional<DeadlineStrategy> deadline_strategy_named(std::string_view name) {
    for (auto [n, s] : kStrategies)
        if (n == name) return s;
    return std::nullopt;
}

const char* to_string(DeadlineStrategy s) {
    for (auto [n, v] : kStrategies)
        if (v == s) return n.data();
    return "?";
}

Result<std::vector<DeadlineStrategy>> parse_deadline_strategies(std::string_view text) {
    std::vector<DeadlineStrategy> list;
    for (size_t at = 0; at <= text.size();) {
        size_t comma = std::min(text.find(',', at), text.size());
        std::string_view name = text.substr(at, comma - at);
        auto s = deadline_strategy_named(name);
        if (!s) {
            return Error(fmt::format("x-deadline-strategy '{}': choose cancel, postcopy, downtime, throttle, dirty-limit or "
                                     "cheapest, or several in the order to try them (e.g. downtime,throttle)",
                                     text));
        }
        auto covers = stands_for(*s);
        bool by_name = std::find(list.begin(), list.end(), *s) != list.end();
        if (by_name || std::any_of(covers.begin(), covers.end(), [&list](DeadlineStrategy c) { return lists(list, c); })) {
            return Error(fmt::format("x-deadline-strategy '{}': {} is named twice{}", text, name,
                                     by_name ? "" : " (cheapest is downtime and throttle, the cheaper first)"));
        }
        if (!list.empty() && list.back() == DeadlineStrategy::cancel) {
            return Error(fmt::format("x-deadline-strategy '{}': cancel gives up the migration, so it can only come last "
                                     "(and a list that cannot meet the deadline cancels anyway)",
                                     text));
        }
        list.push_back(*s);
        at = comma + 1;
    }
    return list;
}

Status check_deadline_strategy(std::string_view text) {
    if (auto list = parse_deadline_strategies(text); !list) return list.error();
    return {};
}

bool names_strategy(std::string_view text, DeadlineStrategy s) {
    auto list = parse_deadline_strategies(text);
    return list && lists(*list, s);
}

Result<uint64_t> parse_deadline_ms(std::string_view text) {
    if (text == "off") return uint64_t{0};
    static constexpr std::array<std::pair<std::string_view, uint64_t>, 6> kUnits{
        {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}}};  // bare: seconds
    size_t cut = std::min(text.find_first_not_of("0123456789"), text.size());
    std::string_view digits = text.substr(0, cut), suffix = text.substr(cut);
    uint64_t unit = 0;
    for (auto [name, ms] : kUnits)
        if (name == suffix) unit = ms;
    auto n = digits.empty() || digits.size() > 15 ? Result<uint64_t>(Error("")) : parse_uint(digits);
    if (unit == 0 || !n || *n == 0 || *n > kTenYearsMs / unit) {
        return Error(fmt::format("x-deadline '{}': a time from 1ms to 10 years (e.g. 30s, 90000ms, 5m, 2h, 1d), or off",
                                 text));
    }
    return *n * unit;
}

Status check_deadline(std::string_view text) {
    auto v = parse_deadline_ms(text);
    if (!v) return v.error();
    return {};
}

namespace {

std::optional<DeadlineAction> one_strategy(const DeadlineFacts& f, std::string& tried);

// cheapest: the longer pause and the throttle that meet the deadline, weighed by guest_cost_ms;
// the one that can where only one can. Its `why` says what each would cost, or why the other cannot.
std::optional<DeadlineAction> cheaper_of_two(const DeadlineFacts& f, std::string& tried) {
    DeadlineFacts one = f;
    std::string pause_not, throttle_not;
    one.strategy = DeadlineStrategy::downtime;
    auto pause = one_strategy(one, pause_not);
    one.strategy = DeadlineStrategy::throttle;
    auto throttle = one_strategy(one, throttle_not);
    if (!pause && !throttle) tried += pause_not + throttle_not;
    if (!pause || !throttle) {
        if (pause) pause->why = "cheapest: no throttle meets it" + throttle_not;
        if (throttle) throttle->why = "cheapest: no pause allowed meets it" + pause_not;
        return pause ? pause : throttle;
    }
    EtaFacts paused = f.eta;
    paused.downtime_limit_ms = static_cast<double>(pause->downtime_ms);
    EtaFacts throttled = f.eta;
    throttled.dirty_bytes_per_s = unthrottled_rate(f) * (1.0 - throttle->throttle_percent / 100.0);
    // Each meets the deadline, so each ends: a cost of none is not reached.
    double pause_cost = guest_cost_ms(paused, f.throttle_percent).value_or(HUGE_VAL);
    double throttle_cost = guest_cost_ms(throttled, throttle->throttle_percent).value_or(HUGE_VAL);
    DeadlineAction& pick = throttle_cost <= kThrottleCostMargin * pause_cost ? *throttle : *pause;
    pick.why = fmt::format("cheapest: the guest gives up {:.1f} s to a downtime-limit of {} ms, {:.1f} s to a "
                           "{} % throttle",
                           pause_cost / 1000, pause->downtime_ms, throttle_cost / 1000, throttle->throttle_percent);
    return pick;
}

// What one strategy does about a miss; nothing, with what it could not do added to `tried`, when
// it cannot meet the deadline (cancel never can: the list ends there).
std::optional<DeadlineAction> one_strategy(const DeadlineFacts& f, std::string& tried) {
    switch (f.strategy) {
        case DeadlineStrategy::cancel: return std::nullopt;
        case DeadlineStrategy::postcopy:
            if (auto late = postcopy_misses(f)) {
                tried += *late;
                return std::nullopt;
            }
            return DeadlineAction{DeadlineAction::Kind::postcopy, 0, {}};
        case DeadlineStrategy::downtime:
            if (auto ms = least_downtime(f)) return DeadlineAction{DeadlineAction::Kind::downtime, *ms, {}};
            tried += fmt::format("; not even a downtime of {} ms (x-deadline-max-downtime) would meet it", f.max_downtime_ms);
            return std::nullopt;
        case DeadlineStrategy::throttle: {
            std::string why;
            if (auto t = throttle_that_meets(f, why)) return DeadlineAction{DeadlineAction::Kind::throttle, 0, {}, 0, *t};
            tried += why;
            return std::nullopt;
        }
        case DeadlineStrategy::dirty_limit: {
            if (f.dirty_limit_at_most) {
                tried += "; the vCPUs over their dirty limit are throttled as far as they go";
                return std::nullopt;
            }
            if (auto rate = highest_dirty_rate(f)) return DeadlineAction{DeadlineAction::Kind::dirty_limit, 0, {}, *rate};
            tried += "; not even a guest that dirtied nothing would meet it";
            return std::nullopt;
        }
        case DeadlineStrategy::cheapest: return cheaper_of_two(f, tried);
    }
    return std::nullopt;
}

// The list's first strategy that can meet the deadline; a cancel saying what each could not do
// when none can; nothing yet during a round where one that acts at a round's end comes first.
DeadlineAction on_miss(const DeadlineFacts& f, const std::optional<Eta>& eta) {
    std::string tried;
    DeadlineFacts one = f;
    for (size_t i = 0; i <= f.then.size(); ++i) {
        one.strategy = i == 0 ? f.strategy : f.then[i - 1];
        if (f.during_round && !acts_during_round(one.strategy)) return {};
        if (f.during_round && one.strategy == DeadlineStrategy::throttle && f.throttle_waits) return {};
        auto a = one_strategy(one, tried);
        if (f.during_round && waits_for_rounds_end(one.strategy, a, f)) return {};
        if (a) return *a;
    }
    return cancel(f, eta, tried);
}

}  // namespace

DeadlineAction deadline_passed(const DeadlineFacts& f) {
    if (f.deadline_ms == 0 || f.elapsed_ms < static_cast<double>(f.deadline_ms)) return {};
    auto eta = precopy_eta(f.eta);
    std::string more = eta && eta->converges ? fmt::format("{:.1f} s more predicted", eta->remaining_ms / 1000)
                       : eta                 ? std::string("no end at these rates")
                                             : std::string("nothing measured yet");
    return {DeadlineAction::Kind::cancel, 0,
            fmt::format("x-deadline {:.1f} s passed before the migration ended ({:.1f} s in, {}; x-deadline-strategy {} "
                        "did not meet it); the migration ends here and the guest runs on (raise x-deadline, or choose "
                        "another x-deadline-strategy)",
                        static_cast<double>(f.deadline_ms) / 1000, f.elapsed_ms / 1000, more, list_named(f))};
}

DeadlineAction deadline_action(const DeadlineFacts& f) {
    if (f.deadline_ms == 0) return {};
    if (auto passed = deadline_passed(f); passed.kind != DeadlineAction::Kind::none) return passed;
    auto eta = precopy_eta(f.eta);
    if (!eta) return {};  // nothing measured yet
    if (meets(f, eta)) {  // on time; a throttle well above what meets it eases
        if (auto t = throttle_to_ease(f)) return {DeadlineAction::Kind::ease, 0, {}, 0, *t};
        return {};
    }
    return on_miss(f, eta);
}

}  // namespace vmm::migration
