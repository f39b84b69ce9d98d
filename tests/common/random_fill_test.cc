#include "vmm/common/random_fill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace vmm {

// Prefill fills block after block through one state: two calls must give what one call over
// both would, or a guest's second RAM block would repeat its first.
TEST(FillRandom, ConsecutiveCallsContinueOneSequence) {
    std::vector<uint64_t> whole(1024), parts(1024);
    uint64_t a = random_fill_state(7), b = random_fill_state(7);
    fill_random(whole, a);
    fill_random(std::span(parts).first(300), b);
    fill_random(std::span(parts).subspan(300), b);
    EXPECT_EQ(whole, parts);
    EXPECT_EQ(a, b);
}

TEST(FillRandom, NoZeroWordsAndSeedsDiffer) {
    std::vector<uint64_t> one(4096), two(4096);
    uint64_t s1 = random_fill_state(1), s2 = random_fill_state(2);
    fill_random(one, s1);
    fill_random(two, s2);
    EXPECT_EQ(std::count(one.begin(), one.end(), 0u), 0);  // zero pages would be sent as markers
    EXPECT_NE(one, two);
}

}  // namespace vmm
