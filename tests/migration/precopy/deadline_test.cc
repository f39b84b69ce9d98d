// x-deadline's decisions (precopy/deadline.h): what it takes, and what each strategy does when the
// plan misses the deadline.
#include "vmm/migration/precopy/deadline.h"

#include <fmt/format.h>
#include <cmath>
#include <gtest/gtest.h>

namespace vmm::migration {
namespace {

constexpr double MB = 1e6;

TEST(Deadline, TakesATimeFromAMillisecondToTenYearsOrOff) {
    EXPECT_EQ(*parse_deadline_ms("30s"), 30'000u);
    EXPECT_EQ(*parse_deadline_ms("90000ms"), 90'000u);
    EXPECT_EQ(*parse_deadline_ms("5m"), 300'000u);
    EXPECT_EQ(*parse_deadline_ms("2h"), 7'200'000u);
    EXPECT_EQ(*parse_deadline_ms("1d"), 86'400'000u);
    EXPECT_EQ(*parse_deadline_ms("45"), 45'000u) << "a bare number is seconds";
    EXPECT_EQ(*parse_deadline_ms("off"), 0u);
    EXPECT_EQ(*parse_deadline_ms("3660d"), 3660ull * 86'400'000);
    for (const char* bad : {"0", "0s", "-5", "-5s", "", "s", "3661d", "11y", "10x", "1.5s", "99999999999999999999"}) {
        EXPECT_FALSE(parse_deadline_ms(bad)) << bad;
    }
    EXPECT_EQ(parse_deadline_ms("0").error().message(),
              "x-deadline '0': a time from 1ms to 10 years (e.g. 30s, 90000ms, 5m, 2h, 1d), or off");
}

TEST(Deadline, StrategiesByName) {
    EXPECT_EQ(deadline_strategy_named("postcopy"), DeadlineStrategy::postcopy);
    EXPECT_STREQ(to_string(DeadlineStrategy::downtime), "downtime");
    EXPECT_TRUE(check_deadline_strategy("throttle"));
    EXPECT_EQ(check_deadline_strategy("warp").error().message(),
              "x-deadline-strategy 'warp': choose cancel, postcopy, downtime, throttle, dirty-limit or cheapest, or "
              "several in the order to try them (e.g. downtime,throttle)");
    EXPECT_EQ(deadline_strategy_named("dirty-limit"), DeadlineStrategy::dirty_limit);
}

TEST(Deadline, SeveralStrategiesInTheOrderToTryThem) {
    auto list = parse_deadline_strategies("downtime,throttle,cancel");
    ASSERT_TRUE(list);
    EXPECT_EQ(*list, (std::vector{DeadlineStrategy::downtime, DeadlineStrategy::throttle, DeadlineStrategy::cancel}));
    EXPECT_TRUE(names_strategy("downtime,postcopy", DeadlineStrategy::postcopy));
    EXPECT_FALSE(names_strategy("downtime,throttle", DeadlineStrategy::postcopy));
    EXPECT_FALSE(names_strategy("warp,postcopy", DeadlineStrategy::postcopy));  // not a list vmm takes
    EXPECT_EQ(check_deadline_strategy("cancel,throttle").error().message(),
              "x-deadline-strategy 'cancel,throttle': cancel gives up the migration, so it can only come last (and a "
              "list that cannot meet the deadline cancels anyway)");
    EXPECT_EQ(check_deadline_strategy("throttle,downtime,throttle").error().message(),
              "x-deadline-strategy 'throttle,downtime,throttle': throttle is named twice");
    for (const char* bad : {"", ",", "downtime,", "downtime,,throttle", "downtime throttle", "Throttle"}) {
        SCOPED_TRACE(bad);
        EXPECT_FALSE(check_deadline_strategy(bad));
    }
}

// 100 MB left at 10 MB/s, the guest dirtying 20 MB/s: no end at the 300 ms limit.
DeadlineFacts missing(DeadlineStrategy s) {
    DeadlineFacts f;
    f.deadline_ms = 60'000;
    f.strategy = s;
    f.max_downtime_ms = 2000;
    f.elapsed_ms = 5000;
    f.eta = {100 * 1000 * 1000, 10 * MB, 20 * MB, 300, 0};
    return f;
}

TEST(Deadline, NothingWhileThePlanMeetsIt) {
    DeadlineFacts f = missing(DeadlineStrategy::cancel);
    f.eta.dirty_bytes_per_s = 1 * MB;  // 100 MB at 10 MB/s, rounds shrinking tenfold: about 11 s
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    f.deadline_ms = 0;  // off
    f.eta.dirty_bytes_per_s = 20 * MB;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    f.deadline_ms = 60'000;
    f.eta.link_bytes_per_s = 0;  // nothing measured yet: no plan to miss
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
}

TEST(Deadline, CancelSaysWhyAtOnce) {
    auto a = deadline_action(missing(DeadlineStrategy::cancel));
    EXPECT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_EQ(a.why, "x-deadline 60.0 s cannot be met: 5.0 s in, and no end at these rates (the guest dirties 20.0 MB/s, "
                     "the link moves 10.0 MB/s); the migration ends here and the guest runs on (raise x-deadline, or "
                     "choose another x-deadline-strategy)");
    DeadlineFacts late = missing(DeadlineStrategy::cancel);
    late.eta.dirty_bytes_per_s = 0;  // 10 s of sending, but 55 s have gone
    late.elapsed_ms = 55'000;
    EXPECT_NE(deadline_action(late).why.find("55.0 s in, 10.0 s more predicted"), std::string::npos);
}

TEST(Deadline, PostcopyAndThrottleAct) {
    EXPECT_EQ(deadline_action(missing(DeadlineStrategy::postcopy)).kind, DeadlineAction::Kind::postcopy);
    EXPECT_EQ(deadline_action(missing(DeadlineStrategy::throttle)).kind, DeadlineAction::Kind::throttle);
    DeadlineFacts at_most = missing(DeadlineStrategy::throttle);
    at_most.throttle_at_most = true;
    auto a = deadline_action(at_most);
    EXPECT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("the vCPUs are throttled as far as max-cpu-throttle allows"), std::string::npos);
}

// Past the deadline every strategy cancels: what it gave up (a throttle, a longer pause, a dirty
// limit) did not meet it, and a deadline is kept by ending the migration, the guest running on.
TEST(Deadline, APassedDeadlineCancelsWhateverTheStrategy) {
    for (auto s : {DeadlineStrategy::cancel, DeadlineStrategy::postcopy, DeadlineStrategy::downtime,
                   DeadlineStrategy::throttle, DeadlineStrategy::dirty_limit}) {
        SCOPED_TRACE(to_string(s));
        DeadlineFacts f = missing(s);
        f.eta.dirty_bytes_per_s = 0;  // 10 s more
        f.elapsed_ms = 59'000;        // not passed: the strategy acts
        EXPECT_EQ(deadline_passed(f).kind, DeadlineAction::Kind::none);
        f.elapsed_ms = 61'000;
        auto a = deadline_action(f);
        ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
        EXPECT_EQ(a.why, fmt::format("x-deadline 60.0 s passed before the migration ended (61.0 s in, 10.0 s more "
                                     "predicted; x-deadline-strategy {} did not meet it); the migration ends here and "
                                     "the guest runs on (raise x-deadline, or choose another x-deadline-strategy)",
                                     to_string(s)));
    }
    DeadlineFacts unmeasured = missing(DeadlineStrategy::throttle);
    unmeasured.eta.link_bytes_per_s = 0;
    unmeasured.elapsed_ms = 61'000;
    EXPECT_NE(deadline_action(unmeasured).why.find("61.0 s in, nothing measured yet"), std::string::npos);
}

// throttle aims at the deadline: the throttle whose dirty rate is the highest that meets it, read
// against what the vCPUs would dirty unthrottled, not auto-converge's one step a round.
TEST(Deadline, ThrottleTakesTheThrottleThatMeetsIt) {
    DeadlineFacts f = missing(DeadlineStrategy::throttle);  // 20 MB/s dirty, 10 MB/s link
    auto rate = highest_dirty_rate(f);
    ASSERT_TRUE(rate);
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::throttle);
    EXPECT_EQ(a.throttle_percent, static_cast<uint32_t>(std::ceil(100 * (1 - *rate / (20 * MB)))));
    EXPECT_GT(a.throttle_percent, 20u);  // more than one step
    // The same rate read under a 50 % throttle: the vCPUs would dirty twice that unthrottled.
    f.throttle_percent = 50;
    f.eta.dirty_bytes_per_s = 10 * MB;
    EXPECT_EQ(deadline_action(f).throttle_percent, a.throttle_percent);
    // Never below cpu-throttle-initial: just over what meets it wants about 21 %.
    f.throttle_percent = 0;
    f.eta.dirty_bytes_per_s = *rate / kDirtyLimitMargin * 1.01;
    EXPECT_EQ(deadline_action(f).throttle_percent, 21u);
    f.min_throttle_percent = 30;
    EXPECT_EQ(deadline_action(f).throttle_percent, 30u);
    // Beyond max-cpu-throttle: cancelled at once, saying what it would take.
    f.max_throttle_percent = 60;
    f.throttle_percent = 0;
    f.eta.dirty_bytes_per_s = 100 * MB;
    auto c = deadline_action(f);
    ASSERT_EQ(c.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(c.why.find("; not even max-cpu-throttle 60 % would: the guest would still dirty 40.0 MB/s, and at most "),
              std::string::npos)
        << c.why;
}

// A throttle the plan no longer needs is eased to the one that meets it, when that is at least
// kThrottleEaseStep points lower; a plan that only just meets it keeps the throttle it has.
TEST(Deadline, ThrottleEasesWhenThePlanIsWellAhead) {
    DeadlineFacts f = missing(DeadlineStrategy::throttle);
    f.throttle_percent = 80;
    f.eta.dirty_bytes_per_s = 1 * MB;  // 5 MB/s unthrottled: on time, with room
    auto rate = highest_dirty_rate(f);
    ASSERT_TRUE(rate);
    EXPECT_GT(*rate, 1 * MB) << "a plan that meets it has a higher rate that still does";
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::ease);
    uint32_t want = *rate >= 5 * MB ? 0u : static_cast<uint32_t>(std::ceil(100 * (1 - *rate / (5 * MB))));
    EXPECT_EQ(a.throttle_percent, std::max(want, 40u)) << "at most half the throttle in force goes at once";
    EXPECT_LE(a.throttle_percent + kThrottleEaseStep, 80u);
    // Eased there, the rate read under it is the one the plan allows: nothing more to take back.
    f.throttle_percent = want;
    f.eta.dirty_bytes_per_s = 5 * MB * (1 - want / 100.0);
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    // Under the ease step: kept.
    f.throttle_percent = want + kThrottleEaseStep - 1;
    f.eta.dirty_bytes_per_s = 5 * MB * (1 - f.throttle_percent / 100.0);
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    // No throttle in force, or another strategy: nothing to ease.
    f.throttle_percent = 0;
    f.eta.dirty_bytes_per_s = 1 * MB;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    f.throttle_percent = 80;
    f.strategy = DeadlineStrategy::dirty_limit;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    // A guest that has gone quiet: the throttle comes off, half at a time.
    f.strategy = DeadlineStrategy::throttle;
    f.eta.dirty_bytes_per_s = 0.01 * MB;
    a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::ease);
    EXPECT_EQ(a.throttle_percent, 40u);
    f.throttle_percent = 40;
    EXPECT_EQ(deadline_action(f).throttle_percent, 20u);
    f.throttle_percent = 18;
    EXPECT_EQ(deadline_action(f).throttle_percent, 0u) << "half would be under the ease step: it comes off";
}

// A switch cannot be taken back: a postcopy whose push of what is left would itself end past the
// deadline is not begun; the migration ends at once, saying what would meet it.
TEST(Deadline, PostcopyThatWouldMissItTooCancelsAtOnce) {
    DeadlineFacts f = missing(DeadlineStrategy::postcopy);
    f.deadline_ms = 12'000;  // 5 s in, 100 MB at the link's 10 MB/s: 10 s more
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("x-deadline 12.0 s cannot be met: 5.0 s in, and no end at these rates"), std::string::npos) << a.why;
    EXPECT_NE(a.why.find("; not even postcopy now would: its push of 95.4 MiB at 9.5 MiB/s (the link's rate) takes 10.0 s; "
                         "x-deadline 15 s would meet it, or a push of 13.6 MiB/s"),
              std::string::npos)
        << a.why;
    f.postcopy_bytes_per_s = 25 * MB;  // max-postcopy-bandwidth: 4 s more
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::postcopy);
    f.postcopy_bytes_per_s = 5 * MB;  // 20 s more, said so
    EXPECT_NE(deadline_action(f).why.find("at 4.8 MiB/s (max-postcopy-bandwidth) takes 20.0 s; x-deadline 25 s"),
              std::string::npos)
        << deadline_action(f).why;
}

// 4 MB dirty, rewritten faster than the link moves it: only a pause that carries all of it ends
// the migration; the least such limit is 400 ms (4 MB at 10 MB/s).
TEST(Deadline, DowntimeRaisesTheLimitAsLittleAsMeetsIt) {
    DeadlineFacts f = missing(DeadlineStrategy::downtime);
    f.eta.remaining_bytes = 4 * 1000 * 1000;
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(a.downtime_ms, 400u);
    f.max_downtime_ms = 399;  // the ceiling is below it: cancel, saying so
    a = deadline_action(f);
    EXPECT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("not even a downtime of 399 ms (x-deadline-max-downtime) would meet it"), std::string::npos);
}

// A 32 MB stream rewritten as fast as the link moves it (16 MB/s), read as a 21 MB hot set, 4 s
// in with 3.8 s left. One more round and a 1,313 ms pause would just meet 7.8 s on those rates;
// the strategy keeps a margin and pauses now, for the 2 s all 32 MB take. Where only the bet
// meets the deadline (5 s left with the margin short of it), it takes the bet.
TEST(Deadline, DowntimeKeepsAMarginAndPausesNowWhereOneMoreRoundOnlyJustMeetsIt) {
    DeadlineFacts f = missing(DeadlineStrategy::downtime);
    f.elapsed_ms = 4000;
    f.deadline_ms = 7800;
    f.max_downtime_ms = 7800;
    f.eta = {32 * 1000 * 1000, 16 * MB, 16 * MB, 300, 0};
    f.eta.hot_set_bytes = 21 * MB;
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(a.downtime_ms, 2000u);
    f.max_downtime_ms = 1999;  // no pause now: the one that only just meets it
    a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(a.downtime_ms, 1313u);
}

// `f`, whose pause ceiling (399 ms) is short of what meets it, with the throttle at its most too:
// one cancel saying what each could not do.
void expect_neither_can(DeadlineFacts f) {
    f.throttle_at_most = true;
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("; not even a downtime of 399 ms (x-deadline-max-downtime) would meet it; the vCPUs are "
                         "throttled as far as max-cpu-throttle allows; the migration ends here"),
              std::string::npos)
        << a.why;
}

// downtime,throttle: a pause up to the ceiling first; where none meets it, the throttle; where
// neither can, one cancel saying what each could not do.
TEST(Deadline, TheNextStrategyActsWhereTheOneBeforeCannot) {
    DeadlineFacts f = missing(DeadlineStrategy::downtime);
    f.then = {DeadlineStrategy::throttle};
    f.eta.remaining_bytes = 4 * 1000 * 1000;  // a 400 ms pause meets it
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::downtime);
    f.max_downtime_ms = 399;
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::throttle);
    EXPECT_GT(a.throttle_percent, 0u);
    expect_neither_can(f);
    f.throttle_at_most = true;
    f.elapsed_ms = 61'000;  // passed: the list named as typed
    EXPECT_NE(deadline_action(f).why.find("x-deadline-strategy downtime,throttle did not meet it"), std::string::npos);
}

// During a round only cancel, postcopy and throttle act; a strategy that acts at a round's end
// holds back the ones after it until then.
TEST(Deadline, DuringARoundTheListWaitsAtAStrategyThatActsAtARoundsEnd) {
    DeadlineFacts f = missing(DeadlineStrategy::downtime);
    f.then = {DeadlineStrategy::throttle};
    f.eta.remaining_bytes = 4 * 1000 * 1000;  // a 400 ms pause meets it
    f.during_round = true;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    f.strategy = DeadlineStrategy::throttle;
    f.then = {DeadlineStrategy::downtime};
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::throttle);
    f.throttle_waits = true;  // the last step not shown yet
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    f.throttle_waits = false;
    f.throttle_at_most = true;  // the throttle can do no more: downtime's turn, at the round's end
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    f.during_round = false;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::downtime);
}

// dirty-limit: the guest held to a rate at which the plan meets the deadline, with a margin: the
// plan at that rate meets it, at the rate the strategy found (without the margin) it just does.
TEST(Deadline, DirtyLimitHoldsTheGuestToARateThatMeetsIt) {
    DeadlineFacts f = missing(DeadlineStrategy::dirty_limit);
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::dirty_limit) << a.why;
    EXPECT_GT(a.dirty_bytes_per_s, 0.0);
    EXPECT_LT(a.dirty_bytes_per_s, 10 * MB) << "under the link's rate, or it never converges";
    f.eta.dirty_bytes_per_s = a.dirty_bytes_per_s;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none) << "at the rate it chose the plan meets it";
    f.eta.dirty_bytes_per_s = a.dirty_bytes_per_s / kDirtyLimitMargin * 1.05;
    EXPECT_NE(deadline_action(f).kind, DeadlineAction::Kind::none) << "it chose close to the highest such rate";
}

TEST(Deadline, DirtyLimitCancelsWhenNothingCouldMeetIt) {
    DeadlineFacts f = missing(DeadlineStrategy::dirty_limit);
    f.eta.remaining_bytes = 1000 * 1000 * 1000;  // 1 GB at 10 MB/s: 100 s even if the guest dirtied nothing
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("; not even a guest that dirtied nothing would meet it;"), std::string::npos) << a.why;
    f = missing(DeadlineStrategy::dirty_limit);
    f.dirty_limit_at_most = true;
    a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("the vCPUs over their dirty limit are throttled as far as they go"), std::string::npos) << a.why;
}

// cheapest is downtime and throttle: named beside either, it is named twice.
TEST(Deadline, CheapestStandsForThePauseAndTheThrottle) {
    EXPECT_EQ(deadline_strategy_named("cheapest"), DeadlineStrategy::cheapest);
    EXPECT_TRUE(check_deadline_strategy("cheapest,postcopy,cancel"));
    EXPECT_TRUE(names_strategy("cheapest", DeadlineStrategy::downtime));
    EXPECT_TRUE(names_strategy("postcopy,cheapest", DeadlineStrategy::throttle));
    EXPECT_FALSE(names_strategy("cheapest", DeadlineStrategy::dirty_limit));
    EXPECT_EQ(check_deadline_strategy("cheapest,downtime").error().message(),
              "x-deadline-strategy 'cheapest,downtime': downtime is named twice (cheapest is downtime and throttle, the "
              "cheaper first)");
    EXPECT_EQ(check_deadline_strategy("throttle,cheapest").error().message(),
              "x-deadline-strategy 'throttle,cheapest': cheapest is named twice (cheapest is downtime and throttle, the "
              "cheaper first)");
}

TEST(Deadline, WhatTheGuestGivesUpIsTheSleepOfTheRoundsLeftAndTheLastPause) {
    EtaFacts e{4 * 1000 * 1000, 10 * MB, 0, 300, 0};  // 400 ms of sending, nothing dirtied: one round, then a 0 ms pause
    auto eta = precopy_eta(e);
    ASSERT_TRUE(eta && eta->converges);
    EXPECT_NEAR(*guest_cost_ms(e, 50), 0.5 * (eta->remaining_ms - eta->downtime_ms) + eta->downtime_ms, 1e-9);
    EXPECT_NEAR(*guest_cost_ms(e, 0), eta->downtime_ms, 1e-9);
    e.dirty_bytes_per_s = 20 * MB;
    e.remaining_bytes = 100 * 1000 * 1000;
    EXPECT_FALSE(guest_cost_ms(e, 0)) << "no end: nothing to weigh";
}

// A guest dirtying twice what the link moves, 4 MB left: a 400 ms pause costs it less than the
// throttle that would bring its rate under the link's (more than half its time, over two rounds).
TEST(Deadline, CheapestPausesAGuestThatDirtiesFasterThanTheLink) {
    DeadlineFacts f = missing(DeadlineStrategy::cheapest);
    f.eta.remaining_bytes = 4 * 1000 * 1000;
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime) << a.why;
    EXPECT_EQ(a.downtime_ms, 400u);
    EXPECT_EQ(a.why.rfind("cheapest: the guest gives up 0.4 s to a downtime-limit of 400 ms, ", 0), 0u) << a.why;
    f.max_downtime_ms = 399;  // no pause allowed meets it: the throttle
    a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::throttle);
    EXPECT_GT(a.throttle_percent, 50u);
    EXPECT_EQ(a.why, "cheapest: no pause allowed meets it; not even a downtime of 399 ms (x-deadline-max-downtime) "
                     "would meet it");
    expect_neither_can(f);
    // During a round neither can yet: like downtime, it is tried again at the round's end, with
    // what is dirty then, before the list goes on to cancel.
    f.throttle_at_most = true;
    f.during_round = true;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
}

// A guest dirtying half what the link moves, 100 MB left, with a deadline a little before its
// precopy would end: the least throttle costs it less than the 5 s pause that would meet it.
TEST(Deadline, CheapestThrottlesAGuestThatDirtiesUnderTheLink) {
    DeadlineFacts f = missing(DeadlineStrategy::cheapest);
    f.eta.dirty_bytes_per_s = 5 * MB;
    f.max_downtime_ms = 20'000;
    auto own = precopy_eta(f.eta);
    ASSERT_TRUE(own && own->converges);
    f.deadline_ms = static_cast<uint64_t>(f.elapsed_ms + own->remaining_ms - 500);
    auto a = deadline_action(f);
    ASSERT_EQ(a.kind, DeadlineAction::Kind::throttle) << a.why;
    DeadlineFacts alone = f;  // what throttle and downtime alone would do: the two weighed
    alone.strategy = DeadlineStrategy::throttle;
    EXPECT_EQ(a.throttle_percent, deadline_action(alone).throttle_percent);
    alone.strategy = DeadlineStrategy::downtime;
    auto p = deadline_action(alone);
    ASSERT_EQ(p.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(p.downtime_ms, 5000u) << "after the bulk round, all it dirtied in one pause";
    // 5 s paused against a fifth of the ~17 s left throttled.
    EXPECT_EQ(a.why, fmt::format("cheapest: the guest gives up 5.0 s to a downtime-limit of 5000 ms, 3.8 s to a {} % throttle",
                                 a.throttle_percent));
    // A throttle that starts higher costs more than 0.8 x the pause (kThrottleCostMargin): the pause.
    DeadlineFacts close = f;
    close.min_throttle_percent = 28;
    auto c = deadline_action(close);
    ASSERT_EQ(c.kind, DeadlineAction::Kind::downtime) << c.why;
    EXPECT_EQ(c.why.rfind("cheapest: the guest gives up 5.0 s to a downtime-limit of 5000 ms, 4.", 0), 0u) << c.why;
    // During a round the throttle acts at once; where the pause is cheaper it waits for the round's end.
    f.during_round = true;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::throttle);
    f.throttle_waits = true;
    EXPECT_EQ(deadline_action(f).kind, DeadlineAction::Kind::none);
    DeadlineFacts fast = missing(DeadlineStrategy::cheapest);
    fast.eta.remaining_bytes = 4 * 1000 * 1000;
    fast.during_round = true;
    EXPECT_EQ(deadline_action(fast).kind, DeadlineAction::Kind::none);
}

}  // namespace
}  // namespace vmm::migration
