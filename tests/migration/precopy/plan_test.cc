// The plan before a migration (precopy/plan.h): each strategy's end, downtime, bytes and cost,
// worked out from rates alone.
#include "vmm/migration/precopy/plan.h"

#include "vmm/migration/precopy/deadline.h"

#include <gtest/gtest.h>

namespace vmm::migration {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

PlanFacts facts(double populated_mib, double dirty_mib_s, double link_mib_s, double hot_mib = 0) {
    PlanFacts f;
    f.populated_bytes = static_cast<uint64_t>(populated_mib * kMiB);
    f.dirty = {dirty_mib_s * kMiB, hot_mib * kMiB, 1024 * kMiB, 0};
    f.link_bytes_per_s = link_mib_s * kMiB;
    f.handover_ms = 5;
    f.params.downtime_limit_ms = 300;
    return f;
}

const PlanRow& row(const std::vector<PlanRow>& rows, PlanStrategy s) {
    for (const auto& r : rows)
        if (r.strategy == s) return r;
    throw std::logic_error("no such row");
}

TEST(Plan, AnIdleGuestTakesItsPopulatedBytesAtTheLinksRate) {
    auto rows = plan_migration(facts(100, 0, 100));
    ASSERT_EQ(rows.size(), 6u);
    const PlanRow& p = row(rows, PlanStrategy::precopy);
    EXPECT_TRUE(p.converges);
    EXPECT_EQ(p.rounds, 1u);
    EXPECT_NEAR(p.total_ms, 1000 + 5, 1);
    EXPECT_NEAR(p.downtime_ms, 5, 0.01);
    EXPECT_NEAR(p.sent_bytes, 100 * kMiB, 1);
    EXPECT_EQ(p.throttled_ms, 0);
}

TEST(Plan, RoundsShrinkByTheDirtyRateOverTheLink) {
    // 100 MiB at 100 MiB/s while 10 MiB/s are dirtied: rounds of 100 and 10 MiB; the 1 MiB
    // left fits a downtime-limit of 50 ms less the hand-over, the 10 MiB before it did not.
    PlanFacts f = facts(100, 10, 100);
    f.params.downtime_limit_ms = 50;
    const PlanRow p = row(plan_migration(f), PlanStrategy::precopy);
    EXPECT_TRUE(p.converges);
    EXPECT_EQ(p.rounds, 2u);
    EXPECT_NEAR(p.downtime_ms, 5 + 10, 0.5);
    EXPECT_NEAR(p.total_ms, 1000 + 100 + 15, 1);
    EXPECT_NEAR(p.sent_bytes, (100 + 10 + 1) * kMiB, 1);
}

TEST(Plan, AGuestOutrunningTheLinkHasNoEndWithoutAutoConvergeAndOneWithIt) {
    auto rows = plan_migration(facts(100, 150, 100));
    const PlanRow& p = row(rows, PlanStrategy::precopy);
    EXPECT_FALSE(p.converges);
    EXPECT_NE(p.why_no_end.find("never fit downtime-limit 300 ms"), std::string::npos) << p.why_no_end;
    const PlanRow& a = row(rows, PlanStrategy::auto_converge);
    EXPECT_TRUE(a.converges) << a.why_no_end;
    EXPECT_GT(a.throttle_percent, 33u) << "150 MiB/s must be throttled below 100 MiB/s";
    EXPECT_GT(a.throttled_ms, 0);
}

TEST(Plan, AHotSetBiggerThanTheDowntimeMovesEndsNoPrecopyAndSaysWhatWould) {
    // 20 MiB rewritten all the time at 10 MiB/s: every round leaves the 20 MiB dirty, 2 s of
    // link; only a throttle past 95 % makes a round of 2 s leave less than the hot set.
    auto rows = plan_migration(facts(100, 200, 10, 20));
    const PlanRow& p = row(rows, PlanStrategy::precopy);
    EXPECT_FALSE(p.converges);
    EXPECT_NE(p.why_no_end.find("rounds stay at 20 MiB"), std::string::npos) << p.why_no_end;
    EXPECT_NE(p.why_no_end.find("a downtime-limit of 2005 ms would end it"), std::string::npos) << p.why_no_end;
    const PlanRow& a = row(rows, PlanStrategy::auto_converge);
    EXPECT_TRUE(a.converges) << a.why_no_end;
    EXPECT_GE(a.throttle_percent, 96u);
    const PlanRow& after = row(rows, PlanStrategy::postcopy_after_round);
    EXPECT_TRUE(after.converges);
    EXPECT_NEAR(after.sent_bytes, 120 * kMiB, 1);
    EXPECT_NEAR(after.total_ms, 10000 + 5 + 2000, 1);
    EXPECT_NEAR(after.blocked_ms_at_most, 2000, 1);
    const PlanRow& now = row(rows, PlanStrategy::postcopy_now);
    EXPECT_NEAR(now.total_ms, 5 + 10000, 1);
    EXPECT_NEAR(now.downtime_ms, 5, 0.01);
    EXPECT_NEAR(now.blocked_ms_at_most, 10000, 1);
}

// The same guest with one pause: downtime-limit raised to what carries the hot set once after
// the bulk round, 2005 ms, as precopy's "what would end it" says; it costs the guest that pause,
// far less than auto-converge's throttle past 95 % for the rounds it needs. Under x-deadline it
// is the least that ends within 80 % of it; a deadline shorter than the bulk round and the pause
// has none.
TEST(Plan, OnePauseCarriesTheHotSetOnceAfterTheBulkRound) {
    PlanFacts f = facts(100, 200, 10, 20);
    auto rows = plan_migration(f);
    const PlanRow& one = row(rows, PlanStrategy::one_pause);
    EXPECT_STREQ(to_string(one.strategy), "precopy + one pause");
    ASSERT_TRUE(one.converges) << one.why_no_end;
    EXPECT_EQ(one.pause_limit_ms, 2005u);
    EXPECT_EQ(one.rounds, 1u);
    EXPECT_NEAR(one.downtime_ms, 2005, 1);
    EXPECT_NEAR(one.total_ms, 10000 + 2005, 1);
    EXPECT_EQ(one.throttled_ms, 0);
    EXPECT_GT(row(rows, PlanStrategy::auto_converge).throttled_ms, one.downtime_ms);
    f.deadline_ms = 20'000;  // 16 s with the margin: the same pause
    EXPECT_EQ(row(plan_migration(f), PlanStrategy::one_pause).pause_limit_ms, 2005u);
    f.deadline_ms = 11'000;
    const PlanRow none = row(plan_migration(f), PlanStrategy::one_pause);
    EXPECT_FALSE(none.converges);
    EXPECT_EQ(none.why_no_end, "x-deadline 11.0 s is too short even for one pause after the bulk round");
    // A guest whose rounds shrink ends at the limit in force: its one pause is precopy's.
    const PlanRow calm = row(plan_migration(facts(100, 10, 100)), PlanStrategy::one_pause);
    EXPECT_TRUE(calm.converges);
    EXPECT_EQ(calm.pause_limit_ms, 300u);
}

TEST(Plan, ThePushHeldToMaxPostcopyBandwidthTakesLongerButFaultsDoNot) {
    PlanFacts f = facts(100, 0, 100);
    f.postcopy_bytes_per_s = 50 * kMiB;
    const PlanRow now = row(plan_migration(f), PlanStrategy::postcopy_now);
    EXPECT_NEAR(now.total_ms, 5 + 2000, 1);
    EXPECT_NEAR(now.blocked_ms_at_most, 1000, 1);
}

// A round leaves what the guest dirties at its rate, and no more than its hot set (what the
// sampler found it keeps rewriting: tests/memory/working_set_test.cc).
TEST(Plan, ARoundLeavesTheRateTimesItsLengthUpToTheHotSet) {
    DirtyModel m{10 * kMiB, 12 * kMiB, 1024 * kMiB, 0};
    EXPECT_NEAR(m.after(0.5), 5 * kMiB, 1);
    EXPECT_NEAR(m.after(10), 12 * kMiB, 1);
    EXPECT_NEAR(m.after(0.5, 50), 2.5 * kMiB, 1);
}

TEST(Plan, AHotSetRewrittenWithinAPeriodIsAllDirtyAfterAShortRound) {
    // 4 MiB rewritten three times a second: a period counts 4 MiB/s, its first tenth 12 MiB/s.
    // A round of 0.4 s at 10 MiB/s leaves all 4 MiB dirty (0.4 s more): no end under 300 ms.
    PlanFacts f = facts(64, 4, 10, 4);
    f.dirty.fast_bytes_per_s = 12 * kMiB;
    EXPECT_NEAR(f.dirty.after(0.4), 4 * kMiB, 1);
    EXPECT_FALSE(row(plan_migration(f), PlanStrategy::precopy).converges);
    f.dirty.fast_bytes_per_s = 0;  // what the period alone would have said: 1.6 MiB, 160 ms
    EXPECT_TRUE(row(plan_migration(f), PlanStrategy::precopy).converges);
}

// Two vCPUs, one dirtying 150 MiB/s and one 10, over a 100 MiB/s link: the limit holds the busy
// one alone, to what leaves half the link in all (40 MiB/s with the quiet one's 10), and precopy
// ends; the quiet vCPU is never slowed, so the guest's cost is half the busy one's throttle.
TEST(Plan, ADirtyLimitHoldsOnlyTheBusyVcpuToHalfTheLink) {
    PlanFacts f = facts(100, 160, 100);
    f.vcpu_bytes_per_s = {150 * kMiB, 10 * kMiB};
    auto rows = plan_migration(f);
    EXPECT_FALSE(row(rows, PlanStrategy::precopy).converges);
    const PlanRow& d = row(rows, PlanStrategy::dirty_limit);
    EXPECT_TRUE(d.converges) << d.why_no_end;
    EXPECT_EQ(d.limited_vcpus, 1u);
    EXPECT_NEAR(d.vcpu_limit_bytes_per_s, 40 * kMiB, 1);
    EXPECT_EQ(d.throttle_percent, 74u) << "150 MiB/s held to 40: 73.3 % of its time asleep";
    // Rounds of 100, 50, 25 ... MiB at 100 MiB/s: 2 s at most before the switch.
    double rounds_ms = d.total_ms - d.downtime_ms;
    EXPECT_GT(rounds_ms, 1000);
    EXPECT_LT(rounds_ms, 2000);
    EXPECT_NEAR(d.throttled_ms, rounds_ms * (1 - 40.0 / 150) / 2, 1);
    EXPECT_LT(d.throttled_ms, row(rows, PlanStrategy::auto_converge).throttled_ms)
        << "auto-converge slows both vCPUs, the limit only the busy one";
}

// With x-deadline the limit is what the strategy would set: the highest rate whose precopy meets
// the deadline, times its margin; a guest already under it is not held at all, and a deadline no
// guest could meet is said so.
TEST(Plan, ADirtyLimitUnderADeadlineAimsAtTheRateThatMeetsIt) {
    PlanFacts f = facts(100, 80, 100);
    f.vcpu_bytes_per_s = {80 * kMiB};
    f.deadline_ms = 3000;
    const PlanRow d = row(plan_migration(f), PlanStrategy::dirty_limit);
    ASSERT_TRUE(d.converges) << d.why_no_end;
    EXPECT_LE(d.total_ms, 3000);
    EXPECT_EQ(d.limited_vcpus, 1u);
    EXPECT_GT(d.vcpu_limit_bytes_per_s, 30 * kMiB) << "a 3 s deadline leaves room for more than a third of the link";
    EXPECT_LT(d.vcpu_limit_bytes_per_s, 80 * kMiB * kDirtyLimitMargin);
    f.deadline_ms = 60'000;
    const PlanRow unheld = row(plan_migration(f), PlanStrategy::dirty_limit);
    EXPECT_EQ(unheld.limited_vcpus, 0u) << "80 MiB/s meets a minute's deadline unheld";
    EXPECT_EQ(unheld.throttled_ms, 0);
    f.deadline_ms = 500;  // 100 MiB take a second at 100 MiB/s
    const PlanRow never = row(plan_migration(f), PlanStrategy::dirty_limit);
    EXPECT_FALSE(never.converges);
    EXPECT_NE(never.why_no_end.find("x-deadline 0.5 s is too short"), std::string::npos) << never.why_no_end;
}

TEST(Plan, NoLinkRateNoPlan) {
    EXPECT_TRUE(plan_migration(facts(100, 0, 0)).empty());
}

}  // namespace
}  // namespace vmm::migration
