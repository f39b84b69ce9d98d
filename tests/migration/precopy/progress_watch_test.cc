// x-stall-timeout's decisions (precopy/progress_watch.h): what counts as progress, when a stall is
// said, and what each strategy does about it.
#include "vmm/migration/precopy/progress_watch.h"

#include <gtest/gtest.h>

namespace vmm::migration {
namespace {

constexpr double kMBps = 1e6;
constexpr uint64_t MiB = 1024 * 1024;

TEST(ProgressWatch, OnlyANewLowIsProgress) {
    ProgressWatch w(10'000);
    EXPECT_FALSE(w.stalled(100 * MiB, 0));
    EXPECT_FALSE(w.stalled(80 * MiB, 4'000));  // a new low: the clock starts again at 4 s
    EXPECT_FALSE(w.stalled(90 * MiB, 9'000));  // above the low: no progress, but not for 10 s yet
    EXPECT_FALSE(w.stalled(80 * MiB, 13'999)) << "equal to the low is not a new one, and 9.999 s have passed";
    EXPECT_TRUE(w.stalled(85 * MiB, 14'000));
    EXPECT_EQ(w.lowest(), 80 * MiB);
    EXPECT_EQ(w.describe(85 * MiB, 14'000), "no progress for 10.0 s: 85.0 MiB left, its lowest 80.0 MiB at 4.0 s");
    EXPECT_FALSE(w.stalled(85 * MiB, 20'000)) << "said once a stall";
    w.restart(20'000);  // the strategy acted: a new stall is counted from here
    EXPECT_FALSE(w.stalled(85 * MiB, 29'000));
    EXPECT_TRUE(w.stalled(85 * MiB, 30'000));
    EXPECT_FALSE(w.stalled(70 * MiB, 31'000)) << "a new low ends the stall";
    EXPECT_FALSE(w.stalled(75 * MiB, 40'000));
    EXPECT_TRUE(w.stalled(75 * MiB, 41'000));
}

TEST(ProgressWatch, OffSaysNothing) {
    ProgressWatch w(0);
    EXPECT_FALSE(w.on());
    EXPECT_FALSE(w.stalled(100, 0));
    EXPECT_FALSE(w.stalled(100, 1e9));
}

// 100 MB left at 10 MB/s, the guest dirtying 20 MB/s: no end at the 300 ms limit.
DeadlineFacts stuck(DeadlineStrategy s) {
    DeadlineFacts f;
    f.strategy = s;
    f.max_downtime_ms = 20'000;
    f.elapsed_ms = 45'000;
    f.eta = {100 * 1000 * 1000, 10 * kMBps, 20 * kMBps, 300, 0};
    return f;
}

TEST(ProgressWatch, EachStrategyActsOnAStall) {
    const std::string what = "no progress for 30.0 s: 95.4 MiB left, its lowest 90.0 MiB at 15.0 s";
    auto c = stall_action(stuck(DeadlineStrategy::cancel), what);
    EXPECT_EQ(c.kind, DeadlineAction::Kind::cancel);
    EXPECT_EQ(c.why, "x-stall-timeout: " + what +
                         "; the migration ends here and the guest runs on (raise x-stall-timeout, or choose another "
                         "x-deadline-strategy)");
    EXPECT_EQ(stall_action(stuck(DeadlineStrategy::postcopy), what).kind, DeadlineAction::Kind::postcopy);
    EXPECT_EQ(stall_action(stuck(DeadlineStrategy::throttle), what).kind, DeadlineAction::Kind::throttle);
    DeadlineFacts at_most = stuck(DeadlineStrategy::throttle);
    at_most.throttle_at_most = true;
    EXPECT_NE(stall_action(at_most, what).why.find("the vCPUs are throttled as far as max-cpu-throttle allows"),
              std::string::npos);
}

TEST(ProgressWatch, AStallTriesTheListInTurn) {
    DeadlineFacts f = stuck(DeadlineStrategy::throttle);
    f.then = {DeadlineStrategy::downtime};
    f.throttle_at_most = true;  // the throttle can do no more: a pause that ends it
    auto a = stall_action(f, "stalled");
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(a.downtime_ms, 10'000u);
    f.max_downtime_ms = 9'999;
    a = stall_action(f, "stalled");
    ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("stalled; the vCPUs are throttled as far as max-cpu-throttle allows; not even a downtime of "
                         "9999 ms (x-deadline-max-downtime) would end it"),
              std::string::npos)
        << a.why;
}

// downtime: the least limit that ends the migration at these rates: 100 MB at 10 MB/s is 10 s in
// one pause; a ceiling below it cancels, saying so.
TEST(ProgressWatch, DowntimeRaisesTheLimitAsLittleAsEndsIt) {
    DeadlineFacts f = stuck(DeadlineStrategy::downtime);
    auto a = stall_action(f, "stalled");
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(a.downtime_ms, 10'000u);
    f.max_downtime_ms = 9'999;
    a = stall_action(f, "stalled");
    EXPECT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("not even a downtime of 9999 ms (x-deadline-max-downtime) would end it"), std::string::npos);
}

// cheapest, with no deadline to weigh the two by: the pause that ends it where the ceiling allows
// one, else a throttle step; where neither can, a cancel saying what each could not do.
TEST(ProgressWatch, CheapestEndsAStallByThePauseElseAThrottleStep) {
    DeadlineFacts f = stuck(DeadlineStrategy::cheapest);
    auto a = stall_action(f, "stalled");
    ASSERT_EQ(a.kind, DeadlineAction::Kind::downtime);
    EXPECT_EQ(a.downtime_ms, 10'000u);
    f.max_downtime_ms = 9'999;
    a = stall_action(f, "stalled");
    ASSERT_EQ(a.kind, DeadlineAction::Kind::throttle);
    EXPECT_EQ(a.throttle_percent, 0u) << "one step";
    f.throttle_at_most = true;
    a = stall_action(f, "stalled");
    ASSERT_EQ(a.kind, DeadlineAction::Kind::cancel);
    EXPECT_NE(a.why.find("stalled; not even a downtime of 9999 ms (x-deadline-max-downtime) would end it; the vCPUs are "
                         "throttled as far as max-cpu-throttle allows"),
              std::string::npos)
        << a.why;
}

}  // namespace
}  // namespace vmm::migration
