#include "vmm/memory/dirty_bitmap.h"

#include <gtest/gtest.h>

namespace vmm::memory {

// Runs of set bits: maximal, across word boundaries, cut at `max`, never past `end`.
TEST(DirtyBitmap, NextRunFindsMaximalRunsAcrossWords) {
    std::vector<uint64_t> w(4, 0);
    auto set = [&](uint64_t p) { w[p / 64] |= uint64_t{1} << (p % 64); };
    for (uint64_t p = 60; p < 70; ++p) set(p);  // 60..69, across words 0 and 1
    set(130);
    set(255);
    PageRun r = next_run(w, 0, 256);
    EXPECT_EQ(r.first, 60u);
    EXPECT_EQ(r.count, 10u);
    r = next_run(w, 65, 256);
    EXPECT_EQ(r.first, 65u);
    EXPECT_EQ(r.count, 5u);
    r = next_run(w, 70, 256);
    EXPECT_EQ(r.first, 130u);
    EXPECT_EQ(r.count, 1u);
    r = next_run(w, 60, 256, 4);
    EXPECT_EQ(r.count, 4u) << "cut at max";
    r = next_run(w, 131, 255);
    EXPECT_EQ(r.count, 0u) << "the bit at end is outside";
    r = next_run(w, 131, 256);
    EXPECT_EQ(r.first, 255u);
    EXPECT_EQ(next_run(w, 256, 256).count, 0u);
}

// set_run on a plain bitmap: exactly [first, first + count), whole words and partial ones.
TEST(DirtyBitmap, SetRunSetsExactlyItsRunAcrossWords) {
    std::vector<uint64_t> w(4, 0);
    set_run(w, 60, 140);  // 60..199: the end of word 0, all of 1 and 2, the start of 3
    EXPECT_EQ(count_bits(w.data(), w.size()), 140u);
    EXPECT_EQ(w[1], ~uint64_t{0});
    EXPECT_EQ(next_run(w, 0, 256).first, 60u);
    EXPECT_EQ(next_run(w, 0, 256).count, 140u);
    set_run(w, 250, 0);  // empty: nothing
    set_run(w, 255, 1);
    EXPECT_EQ(count_bits(w.data(), w.size()), 141u);
    EXPECT_EQ(word_mask(3, 2), uint64_t{0b11000});
    EXPECT_EQ(word_mask(64, 64), ~uint64_t{0});
}

TEST(DirtyBitmap, SetTestCountAndRangesAcrossWords) {
    DirtyBitmap b(200);
    b.set(0);
    b.set(63);
    b.set(64);
    b.set(199);
    b.set(200);  // out of range: ignored
    EXPECT_TRUE(b.test(63));
    EXPECT_TRUE(b.test(64));
    EXPECT_FALSE(b.test(65));
    EXPECT_EQ(b.count(), 4u);
    b.clear();
    b.set_range(60, 70);  // 60..129
    EXPECT_EQ(b.count(), 70u);
    EXPECT_FALSE(b.test(59));
    EXPECT_TRUE(b.test(129));
    EXPECT_FALSE(b.test(130));
    b.set_range(190, 1000);  // clipped at the end
    EXPECT_EQ(b.count(), 80u);
}

TEST(DirtyBitmap, TakeMovesEveryBitOutAndLeavesItClear) {
    DirtyBitmap b(130);
    b.set(1);
    b.set(129);
    std::vector<uint64_t> out;
    b.take(out);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0], 2u);
    EXPECT_EQ(out[2], 2u);
    EXPECT_EQ(b.count(), 0u);
}

TEST(DirtyBitmap, MergeOrsKvmWordsAndCountsThem) {
    DirtyBitmap b(128);
    b.set(0);
    std::vector<uint64_t> kvm{0x3, 0x8000000000000000ull};
    EXPECT_EQ(b.merge(kvm.data()), 3u);
    EXPECT_EQ(b.count(), 3u);  // bit 0 was already set
    EXPECT_TRUE(b.test(127));
}

}  // namespace vmm::memory
