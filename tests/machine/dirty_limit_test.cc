// The per-vCPU dirty limit's arithmetic (machine/dirty_limit.h): the throttle that holds one vCPU
// to its limit, and the one limit that holds a guest to a total.
#include "vmm/machine/dirty_limit.h"

#include <gtest/gtest.h>

#include <numeric>

namespace vmm::machine {
namespace {

TEST(DirtyLimit, AVcpuOverItsLimitIsThrottledToItAtOnce) {
    EXPECT_EQ(throttle_for_limit(1000, 0, 250), 75u) << "dirtying 4 times its limit: runs a quarter of the time";
    EXPECT_EQ(throttle_for_limit(500, 50, 250), 75u) << "measured under a 50 % throttle: its own rate is 1000";
    EXPECT_EQ(throttle_for_limit(100, 0, 250), 0u) << "under its limit: free";
    EXPECT_EQ(throttle_for_limit(1e9, 0, 1), 99u) << "at most VcpuThrottle's 99 %";
    EXPECT_EQ(throttle_for_limit(0, 0, 250), 0u);
}

TEST(DirtyLimit, AVcpuThatWentQuietIsLetGoByHalves) {
    EXPECT_EQ(throttle_for_limit(0, 80, 250), 40u);
    EXPECT_EQ(throttle_for_limit(0, 40, 250), 20u);
    EXPECT_EQ(throttle_for_limit(0, 1, 250), 0u);
    EXPECT_EQ(throttle_for_limit(250, 50, 250), 50u) << "its own rate 500: 50 % needed, so it stays";
}

TEST(DirtyLimit, OneCapHoldsOnlyTheVcpusOverIt) {
    std::vector<double> rates{100, 200, 1000, 3000};
    auto cap = common_cap(rates, 1300);  // 100 + 200 keep theirs, 1000 shared by the two busy ones
    ASSERT_TRUE(cap);
    EXPECT_DOUBLE_EQ(*cap, 500);
    double held = 0;
    for (double r : rates) held += std::min(r, *cap);
    EXPECT_DOUBLE_EQ(held, 1300);
    EXPECT_FALSE(common_cap(rates, 4300)) << "they dirty no more than that already";
    EXPECT_FALSE(common_cap({}, 10));
    EXPECT_DOUBLE_EQ(*common_cap(rates, 0), 0);
    EXPECT_DOUBLE_EQ(*common_cap({1000, 1000}, 1000), 500) << "equal vCPUs share equally";
}

}  // namespace
}  // namespace vmm::machine
