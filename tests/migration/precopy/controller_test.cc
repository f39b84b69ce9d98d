#include <gtest/gtest.h>

#include "vmm/migration/precopy/convergence.h"
#include "vmm/migration/core/live_settings.h"
#include "vmm/migration/core/rate_limiter.h"

namespace vmm::migration {

TEST(Convergence, CompletesWhenTheRestFitsTheDowntimeLimit) {
    Parameters p;
    p.downtime_limit_ms = 300;
    Convergence c(p, false);
    // 100 MB/s measured; 50 MB dirty = 500 ms > 300 ms: go on.
    Decision d = c.after_round({100'000'000, 1.0, 50'000'000});
    EXPECT_FALSE(d.complete);
    EXPECT_DOUBLE_EQ(d.bandwidth, 100e6);
    EXPECT_DOUBLE_EQ(d.expected_downtime_ms, 500);
    // 20 MB dirty = 200 ms: done.
    EXPECT_TRUE(c.after_round({100'000'000, 1.0, 20'000'000}).complete);
    EXPECT_TRUE(c.after_round({0, 0.0, 0}).complete);
}

// The hand-over (saving and loading the state) is part of every downtime: the RAM left gets
// only what the limit leaves of it, and the expected downtime counts both.
TEST(Convergence, TheHandOverTakesItsShareOfTheDowntimeLimit) {
    Parameters p;
    p.downtime_limit_ms = 300;
    Convergence c(p, false, 120.0);
    Decision d = c.after_round({100'000'000, 1.0, 20'000'000});  // 200 ms of RAM + 120 > 300
    EXPECT_FALSE(d.complete);
    EXPECT_FALSE(d.limit_unreachable);
    EXPECT_DOUBLE_EQ(d.expected_downtime_ms, 320);
    d = c.after_round({100'000'000, 1.0, 18'000'000});  // 180 + 120 = 300: fits
    EXPECT_TRUE(d.complete);
    EXPECT_DOUBLE_EQ(d.expected_downtime_ms, 300);
    EXPECT_DOUBLE_EQ(c.after_round({100'000'000, 1.0, 0}).expected_downtime_ms, 120);  // nothing dirty
}

// A hand-over longer than the limit: waiting cannot meet it, so the RAM left is held to the
// whole limit (the migration still ends) and the decision says the limit is out of reach.
TEST(Convergence, AHandOverOverTheLimitStillLetsTheMigrationEnd) {
    Parameters p;
    p.downtime_limit_ms = 50;
    Convergence c(p, false, 80.0);
    Decision d = c.after_round({100'000'000, 1.0, 6'000'000});  // 60 ms of RAM
    EXPECT_FALSE(d.complete);
    EXPECT_TRUE(d.limit_unreachable);
    d = c.after_round({100'000'000, 1.0, 4'000'000});  // 40 ms of RAM: as good as it gets
    EXPECT_TRUE(d.complete);
    EXPECT_DOUBLE_EQ(d.expected_downtime_ms, 120);
}

TEST(Convergence, TinyRoundsKeepTheLastRealBandwidth) {
    Parameters p;
    Convergence c(p, false);
    c.after_round({200'000'000, 2.0, 50'000'000});
    Decision d = c.after_round({100, 0.0001, 50'000'000});  // too small to time
    EXPECT_DOUBLE_EQ(d.bandwidth, 100e6);
}

TEST(Convergence, AutoConvergeThrottlesStepByStepUpToTheCeiling) {
    Parameters p;
    p.cpu_throttle_initial = 20;
    p.cpu_throttle_increment = 30;
    p.max_cpu_throttle = 95;
    p.throttle_after_rounds = 2;
    Convergence c(p, true);
    RoundFacts stuck{10'000'000, 1.0, 10'000'000};  // dirtied as much as was sent: not converging
    EXPECT_EQ(c.after_round(stuck).throttle_percent, 0u);
    EXPECT_EQ(c.after_round(stuck).throttle_percent, 20u);
    c.after_round(stuck);
    EXPECT_EQ(c.after_round(stuck).throttle_percent, 50u);
    c.after_round(stuck);
    EXPECT_EQ(c.after_round(stuck).throttle_percent, 80u);
    c.after_round(stuck);
    EXPECT_EQ(c.after_round(stuck).throttle_percent, 95u);
    Convergence off(p, false);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(off.after_round(stuck).throttle_percent, 0u);
}

TEST(RateLimiter, SleepsExactlyAsLongAsTheSenderIsAhead) {
    RateLimiter::Clock::time_point now{};
    std::chrono::nanoseconds slept{0};
    RateLimiter rl(
        1'000'000,
        [&](std::chrono::nanoseconds d) -> Status {
            slept += d;
            now += d;
            return {};
        },
        [&] { return now; });
    ASSERT_TRUE(rl.consume(500'000));  // half a second's worth at once
    EXPECT_EQ(slept, std::chrono::milliseconds(500));
    now += std::chrono::milliseconds(600);  // the sender was slow: no sleep
    slept = {};
    ASSERT_TRUE(rl.consume(100'000));
    EXPECT_EQ(slept.count(), 0);
    // A limiter that follows a live setting: unlimited, then a cap set from another thread (the
    // monitor, through LiveSettings) applies at the next consume.
    LiveSettings live;
    RateLimiter following(live.reader(Live::max_bandwidth),
                          [&](std::chrono::nanoseconds) -> Status { return Error("must not sleep"); });
    EXPECT_TRUE(following.consume(1ull << 40));
    live.set(Live::max_bandwidth, 1'000'000);
    EXPECT_FALSE(following.consume(500'000));
}

// A sender that waits its turn (postcopy's push, which serves requests while it waits): what it
// sent sets when it may send again, and time spent on other work counts toward it.
TEST(RateLimiter, ASenderThatWaitsItsTurnIsNeverLetAhead) {
    RateLimiter::Clock::time_point now{};
    RateLimiter rl(1'000'000, [](std::chrono::nanoseconds) -> Status { return Error("must not sleep"); },
                   [&] { return now; });
    EXPECT_EQ(rl.ahead().count(), 0);
    rl.account(64'000);
    EXPECT_EQ(rl.ahead(), std::chrono::milliseconds(64));
    now += std::chrono::milliseconds(40);  // serving a request meanwhile
    EXPECT_EQ(rl.ahead(), std::chrono::milliseconds(24));
    now += std::chrono::milliseconds(24);
    EXPECT_EQ(rl.ahead().count(), 0);
    rl.account(64'000);
    EXPECT_EQ(rl.ahead(), std::chrono::milliseconds(64)) << "the next run waits a whole run's time again";
}

// A burst that was not held back owes the rate at most the horizon: the sender waits no longer.
TEST(RateLimiter, ABurstIsForgivenBeyondTheHorizon) {
    RateLimiter::Clock::time_point now{};
    RateLimiter rl(1'000'000, [](std::chrono::nanoseconds) -> Status { return Error("must not sleep"); },
                   [&] { return now; });
    rl.account(5'000'000);  // five seconds' worth at once
    EXPECT_EQ(rl.ahead(), std::chrono::seconds(5));
    rl.forgive_beyond(std::chrono::seconds(1));
    EXPECT_EQ(rl.ahead(), std::chrono::seconds(1));
    rl.forgive_beyond(std::chrono::seconds(2));
    EXPECT_EQ(rl.ahead(), std::chrono::seconds(1)) << "within the horizon: nothing forgiven";
    now += std::chrono::seconds(1);
    EXPECT_EQ(rl.ahead().count(), 0);
    rl.account(64'000);
    EXPECT_EQ(rl.ahead(), std::chrono::milliseconds(64)) << "after it, the rate as before";
}

}  // namespace vmm::migration
