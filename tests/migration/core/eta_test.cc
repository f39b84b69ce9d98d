// The time-left model (core/eta.h): rounds shrinking by dirty rate / link rate until one fits
// the downtime limit; no promise when they cannot shrink; postcopy at the push's rate.
#include "vmm/migration/core/eta.h"

#include <gtest/gtest.h>

namespace vmm::migration {
namespace {

constexpr double MB = 1e6;

TEST(Eta, NothingBeforeTheLinkHasMovedAByte) {
    EXPECT_FALSE(precopy_eta({100 * 1000 * 1000, 0, 0, 300, 0}));
    EXPECT_FALSE(postcopy_eta(4096, 0));
}

TEST(Eta, WhatFitsTheLimitGoesInTheLastPause) {
    // 10 MB at 100 MB/s: 100 ms, within 300 ms less a 20 ms hand-over.
    auto e = precopy_eta({10 * 1000 * 1000, 100 * MB, 50 * MB, 300, 20});
    ASSERT_TRUE(e);
    EXPECT_TRUE(e->converges);
    EXPECT_EQ(e->rounds, 0u);
    EXPECT_NEAR(e->downtime_ms, 120, 1e-6);
    EXPECT_NEAR(e->remaining_ms, 120, 1e-6);
}

TEST(Eta, RoundsShrinkByTheDirtyRateOverTheLinkRate) {
    // 1,000 MB at 100 MB/s, the guest dirtying 50 MB/s, 30 MB fitting a 300 ms pause: rounds of
    // 1000, 500, 250, 125, 62.5 and 31.25 MB (10 s down to 0.3125 s), then the last pause
    // carries 15.625 MB (156.25 ms).
    auto e = precopy_eta({1000 * 1000 * 1000, 100 * MB, 50 * MB, 300, 0});
    ASSERT_TRUE(e);
    EXPECT_TRUE(e->converges);
    EXPECT_EQ(e->rounds, 6u);
    EXPECT_NEAR(e->downtime_ms, 156.25, 1e-6);
    EXPECT_NEAR(e->remaining_ms, 10000 + 5000 + 2500 + 1250 + 625 + 312.5 + 156.25, 1e-6);
}

TEST(Eta, NoEndWhenTheGuestDirtiesAsFastAsTheLinkMoves) {
    for (double dirty : {100 * MB, 400 * MB}) {
        auto e = precopy_eta({1000 * 1000 * 1000, 100 * MB, dirty, 300, 0});
        ASSERT_TRUE(e);
        EXPECT_FALSE(e->converges) << dirty;
    }
    // ... unless what is left already fits the pause.
    auto small = precopy_eta({1000, 100 * MB, 400 * MB, 300, 0});
    ASSERT_TRUE(small);
    EXPECT_TRUE(small->converges);
}

TEST(Eta, AHotSetCapsWhatARoundLeavesDirty) {
    // 100 MB at 10 MB/s while the guest dirties 8 MB/s, but only ever the same 2 MB: the bulk
    // round (10 s) leaves 2 MB, which fits a 300 ms pause (3 MB): 10.2 s, where the rate alone
    // would take 13 rounds.
    EtaFacts f{100 * 1000 * 1000, 10 * MB, 8 * MB, 300, 0};
    f.hot_set_bytes = 2 * MB;
    auto e = precopy_eta(f);
    ASSERT_TRUE(e);
    EXPECT_TRUE(e->converges);
    EXPECT_EQ(e->rounds, 1u);
    EXPECT_NEAR(e->remaining_ms, 10000 + 200, 1e-6);
    // Even a guest dirtying faster than the link ends, when its set fits the pause...
    f.dirty_bytes_per_s = 40 * MB;
    ASSERT_TRUE(precopy_eta(f));
    EXPECT_TRUE(precopy_eta(f)->converges);
    // ... and not when it does not: the rounds stay at the set.
    f.hot_set_bytes = 5 * MB;
    ASSERT_TRUE(precopy_eta(f));
    EXPECT_FALSE(precopy_eta(f)->converges);
}

TEST(Eta, AHandOverLongerThanTheLimitLeavesNothingForRam) {
    auto e = precopy_eta({4096, 100 * MB, 0, 300, 500});
    ASSERT_TRUE(e);
    EXPECT_TRUE(e->converges);  // an idle guest: the next round empties it
    EXPECT_EQ(e->rounds, 1u);
    EXPECT_NEAR(e->downtime_ms, 500, 1e-6);
}

TEST(Eta, PostcopyIsTheMissingPagesAtThePushsRate) {
    auto e = postcopy_eta(8 * 1000 * 1000, 4 * MB);
    ASSERT_TRUE(e);
    EXPECT_TRUE(e->converges);
    EXPECT_NEAR(e->remaining_ms, 2000, 1e-6);
    EXPECT_EQ(postcopy_eta(0, 0)->remaining_ms, 0);
}

}  // namespace
}  // namespace vmm::migration
