// MissingPages counts and clears a word of pages at a time: the same sets and counts as a page at
// a time, across word boundaries, for overlapping ranges and a whole block.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "vmm/migration/postcopy/missing_pages.h"

namespace vmm::migration {
namespace {

constexpr uint64_t kPages = 1000;  // not a multiple of 64: the last word is partial

MissingPages make(std::vector<uint8_t>& ram) {
    ram.assign(kPages * kStreamPageSize, 0);
    return MissingPages({BlockInfo{"pc.ram", 0, kPages * kStreamPageSize}}, {ram.data()});
}

TEST(MissingPages, RangesAcrossWordsCountEachPageOnce) {
    std::vector<uint8_t> ram;
    auto m = make(ram);
    m.add(0, 60, 10);  // pages 60..69: two words
    m.add(0, 65, 70);  // overlaps: 65..134, of which 70..134 are new
    EXPECT_EQ(m.total(), 75u);
    EXPECT_EQ(m.remaining(), 75u);
    EXPECT_TRUE(m.missing({0, 60}));
    EXPECT_TRUE(m.missing({0, 134}));
    EXPECT_FALSE(m.missing({0, 59}));
    EXPECT_FALSE(m.missing({0, 135}));
    EXPECT_EQ(m.placed(0, 0, 64), 4u);  // 60..63
    EXPECT_EQ(m.placed(0, 0, 64), 0u);  // placed already
    EXPECT_EQ(m.placed(0, 128, 200), 7u);
    EXPECT_EQ(m.remaining(), 64u);
    EXPECT_EQ(m.placed(0, 0, kPages), 64u);
    EXPECT_EQ(m.remaining(), 0u);
}

TEST(MissingPages, AWholeBlockIsEveryPageAndNoMore) {
    std::vector<uint8_t> ram;
    auto m = make(ram);
    m.add(0, 0, kPages);
    EXPECT_EQ(m.total(), kPages);
    EXPECT_TRUE(m.missing({0, kPages - 1}));
    EXPECT_EQ(m.placed(0, kPages - 3, 3), 3u);
    EXPECT_EQ(m.remaining(), kPages - 3);
}

TEST(MissingPages, AgreesWithAPageAtATimeModelOnRandomRanges) {
    std::vector<uint8_t> ram;
    auto m = make(ram);
    std::vector<bool> model(kPages, false);
    uint64_t total = 0, remaining = 0;
    std::mt19937_64 rng(7);
    for (int i = 0; i < 2000; ++i) {
        uint64_t first = rng() % kPages, count = rng() % (kPages - first + 1);
        bool add = rng() % 2 == 0;
        uint64_t changed = 0;
        for (uint64_t p = first; p < first + count; ++p) {
            if (model[p] != add) ++changed;
            model[p] = add;
        }
        if (add) {
            m.add(0, first, count);
            total += changed;
            remaining += changed;
        } else {
            EXPECT_EQ(m.placed(0, first, count), changed);
            remaining -= changed;
        }
        ASSERT_EQ(m.remaining(), remaining);
        ASSERT_EQ(m.total(), total);
    }
    for (uint64_t p = 0; p < kPages; ++p) ASSERT_EQ(m.missing({0, p}), model[p]) << "page " << p;
}

}  // namespace
}  // namespace vmm::migration
