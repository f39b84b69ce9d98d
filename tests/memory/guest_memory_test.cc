#include "vmm/memory/guest_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <sys/mman.h>
#include <vector>

namespace vmm::memory {

namespace {
constexpr uint64_t M = 1 << 20;
GuestMemory two_blocks() {
    auto m = GuestMemory::create({{"low", 0, 2 * M, HugePages::none}, {"high", 4 * M, 1 * M, HugePages::none}});
    EXPECT_TRUE(m) << m.error().message();
    return std::move(*m);
}
}  // namespace

TEST(GuestMemory, RefusesOverlapsDuplicatesAndMisalignment) {
    auto overlap = GuestMemory::create({{"a", 0, 2 * M, HugePages::none}, {"b", M, M, HugePages::none}});
    ASSERT_FALSE(overlap);
    EXPECT_EQ(overlap.error().message(), "RAM blocks 'b' and 'a' overlap");
    EXPECT_FALSE(GuestMemory::create({{"a", 0, M, HugePages::none}, {"a", 2 * M, M, HugePages::none}}));
    EXPECT_FALSE(GuestMemory::create({{"a", 0x800, M, HugePages::none}}));
    EXPECT_FALSE(GuestMemory::create({{"a", 0, M + 1, HugePages::none}}));
    EXPECT_FALSE(GuestMemory::create({{"a", 0, M, HugePages::hugetlbfs}}));  // hugetlbfs needs 2 MiB multiples
    EXPECT_TRUE(GuestMemory::create({{"b", 3 * M, 4096, HugePages::transparent}}));
    EXPECT_FALSE(GuestMemory::create({}));
}

TEST(GuestMemory, AccessorChecksBoundsOverflowAndBlockCrossing) {
    GuestMemory mem = two_blocks();
    EXPECT_TRUE(mem.host_span(0, 2 * M));
    EXPECT_TRUE(mem.host_span(4 * M + M - 8, 8));
    EXPECT_FALSE(mem.host_span(2 * M - 8, 16));            // runs off the end of 'low'
    EXPECT_FALSE(mem.host_span(3 * M, 8));                 // the hole between blocks
    EXPECT_FALSE(mem.host_span(4 * M + M - 8, 9));         // one byte past 'high'
    EXPECT_FALSE(mem.host_span(UINT64_MAX - 4, 16));       // address overflow
    EXPECT_FALSE(mem.host_span(0, UINT64_MAX));            // length overflow
    auto err = mem.host_span(3 * M, 8);
    EXPECT_EQ(err.error().message(), "guest address range [0x300000, +0x8) is not inside one RAM block");
}

TEST(GuestMemory, VmmWritesMarkExactlyTheTouchedPagesDirty) {
    GuestMemory mem = two_blocks();
    RamBlock* high = mem.find_by_name("high");
    ASSERT_NE(high, nullptr);
    uint8_t data[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ASSERT_TRUE(mem.write(4 * M + 4096 - 5, data));  // straddles pages 0 and 1 of 'high'
    EXPECT_TRUE(high->dirty().test(0));
    EXPECT_TRUE(high->dirty().test(1));
    EXPECT_EQ(high->dirty().count(), 2u);
    EXPECT_EQ(high->dirtied(), 2u);
    EXPECT_EQ(mem.find_by_name("low")->dirty().count(), 0u);
    uint8_t back[10];
    ASSERT_TRUE(mem.read(4 * M + 4096 - 5, back));
    EXPECT_EQ(std::memcmp(data, back, sizeof(data)), 0);
    ASSERT_TRUE(mem.fill(8192, 3 * 4096, 0xaa));
    EXPECT_EQ(mem.find_by_name("low")->dirty().count(), 3u);
}

TEST(GuestMemory, FailedWriteTouchesNothing) {
    GuestMemory mem = two_blocks();
    uint8_t data[16] = {};
    EXPECT_FALSE(mem.write(2 * M - 8, data));
    EXPECT_EQ(mem.find_by_name("low")->dirty().count(), 0u);
}

TEST(GuestMemory, PreallocatedBlocksAreResidentAndZero) {
    auto m = GuestMemory::create({{"lazy", 0, 4 << 20, HugePages::none, false}, {"pre", 8 << 20, 4 << 20, HugePages::none, true}});
    ASSERT_TRUE(m) << m.error().message();
    std::vector<unsigned char> v((4 << 20) / 4096);
    auto resident = [&](uint8_t* p) {
        EXPECT_EQ(::mincore(p, 4 << 20, v.data()), 0);
        size_t n = 0;
        for (auto c : v) n += c & 1;
        return n;
    };
    EXPECT_EQ(resident(m->blocks()[0]->host()), 0u) << "a block without prealloc was populated";
    EXPECT_EQ(resident(m->blocks()[1]->host()), v.size()) << "a preallocated block is not resident";
    const uint8_t* p = m->blocks()[1]->host();
    EXPECT_TRUE(std::all_of(p, p + (4 << 20), [](uint8_t b) { return b == 0; }));
}

}  // namespace vmm::memory
