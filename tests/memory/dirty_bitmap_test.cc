#include "vmm/memory/dirty_bitmap.h"

#include <gtest/gtest.h>

namespace vmm::memory {

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
