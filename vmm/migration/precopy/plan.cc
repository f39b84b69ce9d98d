#include "vmm/migration/precopy/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vmm/common/units.h"
#include "vmm/machine/dirty_limit.h"
#include "vmm/migration/precopy/convergence.h"
#include "vmm/migration/precopy/deadline.h"

namespace vmm::migration {

namespace {
// Rounds followed before it says "no end" (as the ETA's model: q just under 1 takes many).
constexpr uint32_t kPlanMaxRounds = 1000;

std::string no_end(const PlanFacts& f, double round_bytes, uint32_t throttle) {
    double ends_ms = f.handover_ms + round_bytes / f.link_bytes_per_s * 1000.0;
    double fastest = std::max(f.dirty.bytes_per_s, f.dirty.fast_bytes_per_s);
    std::string rate = fmt::format("{}/s", format_size(static_cast<uint64_t>(fastest)));
    if (throttle > 0) rate += fmt::format(" ({} % throttled at most)", throttle);
    return fmt::format("the guest dirties {} against a link of {}/s: rounds stay at {} and never fit downtime-limit "
                       "{} ms; a downtime-limit of {:.0f} ms would end it",
                       rate, format_size(static_cast<uint64_t>(f.link_bytes_per_s)),
                       format_size(static_cast<uint64_t>(round_bytes)), f.params.downtime_limit_ms, std::ceil(ends_ms));
}

// Precopy's rounds on paper, decided by the Convergence the round loop uses: each round sends
// what the one before left dirty at the link's rate, while the guest (throttled as decided)
// dirties more.
PlanRow precopy_row(const PlanFacts& f, bool auto_converge) {
    PlanRow row;
    row.strategy = auto_converge ? PlanStrategy::auto_converge : PlanStrategy::precopy;
    Convergence conv(f.params, auto_converge, f.handover_ms);
    const double link = f.link_bytes_per_s;
    // Convergence times rounds of 64 KiB or more: a bulk round smaller than that is sent as one.
    double r = std::max(static_cast<double>(f.populated_bytes), 64.0 * 1024);
    uint32_t throttle = 0;
    double elapsed_ms = 0;
    for (uint32_t k = 0; k < kPlanMaxRounds; ++k) {
        double secs = r / link;
        double dirty = f.dirty.after(secs, throttle);
        elapsed_ms += secs * 1000.0;
        row.sent_bytes += r;
        row.throttled_ms += secs * 1000.0 * throttle / 100.0;
        row.rounds = k + 1;
        Decision d = conv.after_round({static_cast<uint64_t>(r), secs, static_cast<uint64_t>(dirty)});
        if (d.complete) {
            row.converges = true;
            row.downtime_ms = d.expected_downtime_ms;
            row.total_ms = elapsed_ms + row.downtime_ms;
            row.sent_bytes += dirty;
            return row;
        }
        bool rose = d.throttle_percent > throttle;  // the next round runs slower: see what it leaves
        throttle = d.throttle_percent;
        row.throttle_percent = std::max(row.throttle_percent, throttle);
        bool shrinks = k == 0 || dirty < r * 0.999;
        bool more_throttle = auto_converge && (rose || throttle < f.params.max_cpu_throttle);
        if (!shrinks && !more_throttle) {
            row.why_no_end = no_end(f, dirty, throttle);
            row.total_ms = elapsed_ms;
            return row;
        }
        r = dirty;
    }
    row.why_no_end = no_end(f, r, throttle);
    row.total_ms = elapsed_ms;
    return row;
}

// The guest's dirtying scaled to `share` of it (a limit holds every rate, short rounds' too:
// the shares are of the faster of the two, which is what a round meets).
PlanFacts held_to(const PlanFacts& f, double share) {
    PlanFacts g = f;
    g.dirty.bytes_per_s *= share;
    g.dirty.fast_bytes_per_s *= share;
    return g;
}

// The rate the strategy would hold the guest to under x-deadline: none held when precopy meets
// the deadline as it is; else the strategy's own choice (deadline.h's highest_dirty_rate, on the
// time-left model it decides with, from the start: the populated bytes still to send); none when
// even a guest that dirties nothing misses it.
std::optional<double> rate_for_deadline(const PlanFacts& f, double whole) {
    PlanRow unheld = precopy_row(f, false);
    if (unheld.converges && unheld.total_ms <= static_cast<double>(f.deadline_ms)) return whole;
    DeadlineFacts d;
    d.deadline_ms = f.deadline_ms;
    d.strategy = DeadlineStrategy::dirty_limit;
    d.eta = {f.populated_bytes, f.link_bytes_per_s, whole, static_cast<double>(f.params.downtime_limit_ms), f.handover_ms};
    return highest_dirty_rate(d);
}

// Precopy with the guest held to a dirty rate by one limit per vCPU (plan.h).
PlanRow dirty_limit_row(const PlanFacts& f) {
    double whole = std::max(f.dirty.bytes_per_s, f.dirty.fast_bytes_per_s);  // the rate rounds see
    std::optional<double> target = f.deadline_ms > 0 ? rate_for_deadline(f, whole) : f.link_bytes_per_s / 2;
    if (!target) {
        PlanRow row = precopy_row(held_to(f, 0), false);
        row.strategy = PlanStrategy::dirty_limit;
        row.converges = false;
        row.why_no_end = fmt::format("x-deadline {:.1f} s is too short even for a guest that dirties nothing",
                                     static_cast<double>(f.deadline_ms) / 1000);
        return row;
    }
    double share = whole > *target ? *target / whole : 1.0;
    PlanRow row = precopy_row(held_to(f, share), false);
    row.strategy = PlanStrategy::dirty_limit;
    if (share >= 1.0) return row;  // it dirties less already: nothing is held
    // The vCPUs' rates, or the guest as one; held so that they add up to the share of theirs.
    std::vector<double> rates = f.vcpu_bytes_per_s.empty() ? std::vector<double>{whole} : f.vcpu_bytes_per_s;
    double sum = 0;
    for (double r : rates) sum += r;
    auto cap = machine::common_cap(rates, share * sum);
    if (!cap) return row;
    row.vcpu_limit_bytes_per_s = *cap;
    double held = 0, most = 0;
    for (double r : rates) {
        if (r <= *cap) continue;
        double fraction = r > 0 ? 1.0 - *cap / r : 0;
        held += fraction, most = std::max(most, fraction);
        ++row.limited_vcpus;
    }
    double busy_ms = row.total_ms - row.downtime_ms;  // the rounds, while the guest runs here
    row.throttled_ms = busy_ms * held / static_cast<double>(rates.size());
    row.throttle_percent = static_cast<uint32_t>(std::ceil(most * 100));
    return row;
}

// Precopy with downtime-limit raised as little as ends it (by `by_ms` when that is above 0).
PlanRow pause_row(const PlanFacts& f, double by_ms) {
    auto at = [&](uint64_t ms) {
        PlanFacts g = f;
        g.params.downtime_limit_ms = ms;
        PlanRow row = precopy_row(g, false);
        row.strategy = PlanStrategy::one_pause;
        row.pause_limit_ms = ms;
        return row;
    };
    auto ok = [&](const PlanRow& r) { return r.converges && (by_ms <= 0 || r.total_ms <= by_ms); };
    uint64_t lo = f.params.downtime_limit_ms;
    // A pause that carries all of RAM at once ends any precopy after its bulk round.
    double all = std::max({f.dirty.ram_bytes, f.dirty.hot_bytes, static_cast<double>(f.populated_bytes)});
    uint64_t hi = std::max(lo + 1, static_cast<uint64_t>(all / f.link_bytes_per_s * 1000.0 + f.handover_ms) + 1);
    if (ok(at(lo))) return at(lo);
    auto least = least_limit_ms(lo, hi, [&](uint64_t ms) { return ok(at(ms)); });
    return at(least.value_or(hi));  // none: at hi it does not end (by `by_ms`) either
}

PlanRow one_pause_row(const PlanFacts& f) {
    if (f.deadline_ms == 0) return pause_row(f, 0);
    double deadline = static_cast<double>(f.deadline_ms);
    PlanRow row = pause_row(f, kDowntimeMargin * deadline);
    if (row.converges && row.total_ms <= kDowntimeMargin * deadline) return row;
    row = pause_row(f, deadline);
    if (!row.converges || row.total_ms > deadline) {
        row.converges = false;
        row.why_no_end = fmt::format("x-deadline {:.1f} s is too short even for one pause after the bulk round", deadline / 1000);
    }
    return row;
}

// Postcopy after `bulk_bytes` went in precopy: the switch (the hand-over), then the push of
// what is missing. A vCPU waits for a page it touches at most until the last has arrived; the
// pages it asks for go at the link's rate whatever max-postcopy-bandwidth holds the push to.
PlanRow postcopy_row(const PlanFacts& f, PlanStrategy s, double bulk_bytes) {
    PlanRow row;
    row.strategy = s;
    row.converges = true;
    double secs = bulk_bytes / f.link_bytes_per_s;
    double missing = bulk_bytes > 0 ? f.dirty.after(secs) : static_cast<double>(f.populated_bytes);
    double push = f.postcopy_bytes_per_s > 0 ? std::min(f.postcopy_bytes_per_s, f.link_bytes_per_s) : f.link_bytes_per_s;
    row.rounds = bulk_bytes > 0 ? 1 : 0;
    row.downtime_ms = f.handover_ms;
    row.total_ms = secs * 1000.0 + f.handover_ms + missing / push * 1000.0;
    row.sent_bytes = bulk_bytes + missing;
    row.blocked_ms_at_most = missing / f.link_bytes_per_s * 1000.0;
    return row;
}
}  // namespace

double DirtyModel::after(double seconds, uint32_t throttle_percent) const {
    double rate = std::max(bytes_per_s, fast_bytes_per_s) * (1.0 - std::min<uint32_t>(throttle_percent, 100) / 100.0);
    double v = std::max(0.0, rate * seconds);
    double cap = hot_bytes > 0 ? hot_bytes : ram_bytes;
    return cap > 0 ? std::min(v, cap) : v;
}

const char* to_string(PlanStrategy s) {
    switch (s) {
        case PlanStrategy::precopy: return "precopy";
        case PlanStrategy::auto_converge: return "precopy + auto-converge";
        case PlanStrategy::dirty_limit: return "precopy + dirty limit";
        case PlanStrategy::one_pause: return "precopy + one pause";
        case PlanStrategy::postcopy_after_round: return "postcopy after one round";
        case PlanStrategy::postcopy_now: return "postcopy at once";
    }
    return "?";
}

std::vector<PlanRow> plan_migration(const PlanFacts& f) {
    if (f.link_bytes_per_s <= 0) return {};
    return {precopy_row(f, false), precopy_row(f, true), dirty_limit_row(f), one_pause_row(f),
            postcopy_row(f, PlanStrategy::postcopy_after_round, std::max(static_cast<double>(f.populated_bytes), 1.0)),
            postcopy_row(f, PlanStrategy::postcopy_now, 0)};
}

}  // namespace vmm::migration
