// x-deadline: a precopy that must end within a time the user set, and what to give up first when
// the prediction (core/eta.h) says it will not: nothing is waited for, the source acts as soon as
// the plan misses the deadline. Pure decisions, apart from any I/O, so they are tested alone.
//   cancel    end the migration now, the guest running on here, saying why (the default)
//   postcopy  switch to postcopy now (postcopy-ram on both sides): its end is the push's; one
//             whose push of what is left would itself miss the deadline cancels instead, at
//             once, saying what would meet it (a switch cannot be taken back)
//   downtime  raise downtime-limit, as little as ends it within kDowntimeMargin of the time left (or,
//             failing that, by the deadline), up to x-deadline-max-downtime
//   throttle  slow the vCPUs to the throttle whose dirty rate meets it, and ease it when the
//             plan is well ahead
//   dirty-limit  hold the guest to the dirty rate that meets it, by a limit per vCPU (machine/
//             dirty_limit.h, the dirty ring): the vCPUs dirtying more than their share are
//             throttled, the others run free
//   cheapest  downtime or throttle, whichever the plan says costs the guest less until the end
//             (a pause: its length; a throttle: the share of the time left its vCPUs sleep, and
//             the last pause; the throttle's with a margin), the other where that one cannot meet
//             it (guest_cost_ms below)
// Several may be named, in the order to try them ("downtime,throttle": a longer pause first, up
// to its ceiling, and the throttle where no pause allowed meets it). A strategy that cannot meet
// it (the downtime ceiling too low, the throttle at its ceiling) hands over to the next; the
// last cancels, saying what each could not do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/core/eta.h"

namespace vmm::migration {

enum class DeadlineStrategy { cancel, postcopy, downtime, throttle, dirty_limit, cheapest };
std::optional<DeadlineStrategy> deadline_strategy_named(std::string_view name);
const char* to_string(DeadlineStrategy s);
// x-deadline-strategy as typed: one name, or several joined by commas in the order to try them;
// each at most once (cheapest counting as downtime and throttle), and cancel (which gives up the
// migration) only last.
Result<std::vector<DeadlineStrategy>> parse_deadline_strategies(std::string_view text);
// The strategy's row check (params.cc): a list as above, or one line saying what is wrong.
Status check_deadline_strategy(std::string_view text);
// Whether x-deadline-strategy's list holds `s` (what it needs: postcopy-ram, the dirty ring).
bool names_strategy(std::string_view text, DeadlineStrategy s);

// The least limit in (lo, hi] at which `ok` holds, by halving; `ok` must hold from some limit on
// (a downtime limit, ms: a longer pause ends no later). None when it does not hold at hi.
template <typename Ok>
std::optional<uint64_t> least_limit_ms(uint64_t lo, uint64_t hi, Ok ok) {
    if (hi <= lo || !ok(hi)) return std::nullopt;
    while (lo + 1 < hi) {  // ok(hi), and not ok(lo)
        uint64_t mid = lo + (hi - lo) / 2;
        (ok(mid) ? hi : lo) = mid;
    }
    return hi;
}

// x-deadline as typed: "off" (none), or a duration: "30s", "90000ms", "5m", "2h", "1d" (a bare
// number is seconds), more than 0 and at most ten years.
Result<uint64_t> parse_deadline_ms(std::string_view text);
Status check_deadline(std::string_view text);

struct DeadlineAction {
    enum class Kind { none, cancel, postcopy, downtime, throttle, dirty_limit, ease };
    Kind kind = Kind::none;
    uint64_t downtime_ms = 0;  // downtime: the limit that meets the deadline
    std::string why;           // cancel: the line the migration fails with; cheapest's choice: why it
    double dirty_bytes_per_s = 0;  // dirty_limit: what the whole guest may dirty
    uint32_t throttle_percent = 0; // throttle: the vCPUs' throttle that meets it (0: one step);
                                   // ease: the lower throttle that still meets it (0: none)
};

struct DeadlineFacts {
    uint64_t deadline_ms = 0;
    DeadlineStrategy strategy = DeadlineStrategy::cancel;
    std::vector<DeadlineStrategy> then;  // the list's later names, tried in turn where one cannot meet it
    // The keeper's look during a round: a strategy that acts only at a round's end (downtime,
    // dirty-limit) makes the ones after it wait for that too; and throttle waits while the link
    // has not been measured long enough or the last step has not shown yet.
    bool during_round = false;
    bool throttle_waits = false;
    uint64_t max_downtime_ms = 0;  // x-deadline-max-downtime
    double elapsed_ms = 0;         // since 'migrate'
    EtaFacts eta;                  // as measured now, at the downtime limit in force
    bool throttle_at_most = false; // the vCPUs already throttled as far as max-cpu-throttle allows
    uint32_t throttle_percent = 0;     // the vCPUs' throttle now (the dirty rate read was under it)
    uint32_t min_throttle_percent = 20;  // cpu-throttle-initial: the least a throttle starts at
    uint32_t max_throttle_percent = 99;  // max-cpu-throttle
    bool dirty_limit_at_most = false;  // the limited vCPUs already throttled as far as they go
    double postcopy_bytes_per_s = 0;   // the push after a switch (max-postcopy-bandwidth; 0: the link's, as the plan takes it)
};

// dirty-limit's margin: the guest is held to this share of the highest dirty rate whose plan
// meets the deadline (the rates it is measured at move from period to period).
inline constexpr double kDirtyLimitMargin = 0.8;
// downtime's margin: the limit raised is the least whose prediction ends within this share of
// the time left, where the ceiling allows one. A limit that only just meets the deadline bets on
// the rates read: a guest rewriting a set larger than the sampler saw (a 32 MiB stream at the
// link's rate, read as a 21 MiB hot set) was given one more round and a 1.3 s pause, ended that
// round with 32 MiB dirty again and missed; with the margin it is paused at once (2 s) and ends
// 1.8 s early.
inline constexpr double kDowntimeMargin = 0.8;
// The highest dirty rate (bytes/s) at which the plan meets the deadline, times the margin; none
// when not even a guest that dirties nothing would meet it.
std::optional<double> highest_dirty_rate(const DeadlineFacts& f);

// What the guest gives up from now to the end at `e` (converging) with its vCPUs throttled by
// `throttle_percent`: the share of the rounds left that they sleep, and the last pause; none when
// it does not end. cheapest weighs a longer pause and a throttle by it, as the benchmark counts a
// guest's throttled + blocked time (scripts/bench-deadline.sh).
std::optional<double> guest_cost_ms(const EtaFacts& e, uint32_t throttle_percent);
// cheapest takes the throttle only where it costs at most this share of the pause. A pause costs
// what the plan says (its one-pause row within +-20 % of the run in 10 of 14), a throttle what
// the guest's answer to it makes of its aim, which moves: 2.9 s against 1.9 s aimed for a guest
// dirtying as fast as the link (the pause, 2.0 s), 12.5 s against 8.1 s for one guest at two
// deadlines (docs/performance.md, "Deadlines").
inline constexpr double kThrottleCostMargin = 0.8;

// A cancel once the deadline has passed, whatever the strategy (a deadline is kept by ending
// the migration, the guest running on, when what the strategy gave up did not meet it); else none.
DeadlineAction deadline_passed(const DeadlineFacts& f);
// throttle: the vCPUs' throttle whose dirty rate (the rate read, scaled to the share of time the
// vCPUs would run) is the highest that meets the deadline (highest_dirty_rate), above the throttle
// now and at least cpu-throttle-initial; none when not even max-cpu-throttle would meet it, with
// `why` saying so.
std::optional<uint32_t> throttle_that_meets(const DeadlineFacts& f, std::string& why);
// throttle, on time: a throttle set earlier that the plan no longer needs costs the guest for
// nothing (the first aim is made on a rate read while the link was still being measured, and a
// guest's rate falls): the throttle that meets it now, but at most halving the throttle in
// force, when that is at least kThrottleEaseStep points lower (less moves it back and forth on
// the rates' noise); else none. The keeper eases only at a round's end: during a round, and
// the bulk round above all, the rate read under a throttle says little of what the guest will
// dirty once eased (a benchmark run that eased during rounds swung 0-90 % and missed its
// deadline by 0.3 s).
inline constexpr uint32_t kThrottleEaseStep = 10;
std::optional<uint32_t> throttle_to_ease(const DeadlineFacts& f);
// None while the prediction meets the deadline (or there is none yet), but a throttle that
// eases; a cancel once it has passed.
DeadlineAction deadline_action(const DeadlineFacts& f);

}  // namespace vmm::migration
