// Chunk arithmetic, bounds checks against hostile entries, and the LRU registration cache.
#include "proto/chunks.h"

#include <gtest/gtest.h>

#include "vmm/common/units.h"

#include "proto/registration_cache.h"

namespace rdma_migrate {

namespace {
using vmm::MiB;
// Laid out one after another: pc.ram at offset 0, high at 10 MiB + 8 KiB.
std::vector<LocalBlock> blocks() {
    std::vector<LocalBlock> b{{"pc.ram", nullptr, 10 * MiB + 8192, 0}, {"high", nullptr, 4 * MiB, 1ull << 32}};
    assign_offsets(b);
    return b;
}
constexpr uint64_t kHigh = 10 * MiB + 8192;  // high's offset
ChunkGeometry g1m() { return *ChunkGeometry::make(MiB); }
}  // namespace

TEST(Chunks, SizeMustBeAPowerOfTwoIn1MTo1G) {
    EXPECT_TRUE(ChunkGeometry::make(MiB));
    EXPECT_TRUE(ChunkGeometry::make(1ull << 30));
    for (uint64_t bad : {uint64_t{0}, uint64_t{2048}, uint64_t{4096}, uint64_t{512 * 1024}, uint64_t{3 * MiB}, uint64_t{2ull << 30}}) EXPECT_FALSE(ChunkGeometry::make(bad)) << bad;
    EXPECT_EQ(ChunkGeometry::make(3 * MiB).error().message(),
              "x-rdma-chunk-size 3145728 must be a power of two from 1048576 (1M) to 1073741824 (1G)");
}

TEST(Chunks, ArithmeticAndThePartialLastChunk) {
    auto g = g1m();
    uint64_t len = 10 * MiB + 8192;
    EXPECT_EQ(g.count(len), 11u);
    EXPECT_EQ(g.index(10 * MiB + 4096), 10u);
    EXPECT_EQ(g.start(3), 3 * MiB);
    EXPECT_EQ(g.length(len, 9), MiB);
    EXPECT_EQ(g.length(len, 10), 8192u);
    EXPECT_EQ(g.length(len, 11), 0u);
}

TEST(Chunks, RangesSplitAtChunkBoundariesOnly) {
    auto g = g1m();
    auto p = split_by_chunk(g, MiB - 8192, 2 * MiB + 16384);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_EQ(p[0].chunk, 0u);
    EXPECT_EQ(p[0].length, 8192u);
    EXPECT_EQ(p[1].offset, MiB);
    EXPECT_EQ(p[1].length, MiB);
    EXPECT_EQ(p[3].chunk, 3u);
    EXPECT_EQ(p[3].length, 8192u);
    EXPECT_EQ(split_by_chunk(g, 4096, 8192).size(), 1u);  // contiguous pages in one chunk: one write
    EXPECT_TRUE(split_by_chunk(g, 0, 0).empty());
}

TEST(Bounds, BlocksAreLaidOutOneAfterAnother) {
    EXPECT_EQ(blocks()[0].offset, 0u);
    EXPECT_EQ(blocks()[1].offset, kHigh);
}

// A register request names an address in the destination's RAM offset space (QEMU's
// ram_addr_t) and how many chunks after its own to register too.
TEST(Bounds, RegisterRequestsMustNameChunksInsideTheBlockTheyName) {
    auto g = g1m();
    auto ok = check_register_entry({10 * MiB + 4096, 0, 0}, blocks(), g);
    ASSERT_TRUE(ok) << ok.error().message();
    EXPECT_EQ(ok->first, 10u);
    EXPECT_EQ(ok->offset, 10 * MiB);
    EXPECT_EQ(ok->length, 8192u);  // clipped to the block's end
    auto high = check_register_entry({kHigh + 2 * MiB, 1, 1}, blocks(), g);
    ASSERT_TRUE(high) << high.error().message();
    EXPECT_EQ(high->first, 2u);
    EXPECT_EQ(high->count, 2u);
    EXPECT_EQ(high->length, 2 * MiB);
    EXPECT_EQ(check_register_entry({0, 2, 0}, blocks(), g).error().message(),
              "RDMA REGISTER REQUEST names RAM block 2 (there are 2)");
    EXPECT_EQ(check_register_entry({kHigh, 0, 0}, blocks(), g).error().message(),
              "RDMA REGISTER REQUEST address 0xa02000 is outside 'pc.ram' (0x0+0xa02000)");
    EXPECT_FALSE(check_register_entry({0, 1, 0}, blocks(), g));  // below high's offset
    EXPECT_EQ(check_register_entry({kHigh + 3 * MiB, 1, 1}, blocks(), g).error().message(),
              "RDMA REGISTER REQUEST names chunks 3+2 of 'high', which has 4");
    EXPECT_FALSE(check_register_entry({MiB, 0, UINT64_MAX}, blocks(), g));  // first + count overflows
}

TEST(Bounds, UnregisterRequestsNameAChunkOfTheBlock) {
    auto g = g1m();
    auto ok = check_unregister_entry({10, 0, 0}, blocks(), g);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->first, 10u);
    EXPECT_EQ(check_unregister_entry({11, 0, 0}, blocks(), g).error().message(),
              "RDMA UNREGISTER REQUEST names chunk 11 of 'pc.ram', which has 11");
    EXPECT_FALSE(check_unregister_entry({0, 5, 0}, blocks(), g));
}

TEST(Bounds, CompressEntriesMustBeWholePagesInsideTheBlockTheyName) {
    auto ok = check_compress({0, 1, kHigh, 4 * MiB}, blocks());
    ASSERT_TRUE(ok);
    EXPECT_EQ(*ok, 0u);  // the offset in the block
    EXPECT_EQ(check_compress({0, 1, kHigh + 4 * MiB, 4096}, blocks()).error().message(),
              "RDMA COMPRESS range 0xe02000+0x1000 is not whole pages inside 'high' (0xa02000+0x400000)");
    EXPECT_FALSE(check_compress({0, 1, 0, 4096}, blocks()));  // below the block it names
    EXPECT_FALSE(check_compress({0, 0, 100, 4096}, blocks()));
    EXPECT_FALSE(check_compress({0, 0, 4096, UINT64_MAX - 4095}, blocks()));
    EXPECT_FALSE(check_compress({0, 0, 0, 0}, blocks()));
    EXPECT_FALSE(check_compress({0, 9, 0, 4096}, blocks()));
}

TEST(Bounds, SumsEntriesMustBeWholePagesInsideTheBlockTheyName) {
    EXPECT_TRUE(check_sums_entry({1, 4 * MiB - 4096, {7}}, blocks()));  // offsets in the block, not the RAM space
    EXPECT_TRUE(check_sums_entry({0, 0, std::vector<uint64_t>((10 * MiB + 8192) / 4096)}, blocks()));
    EXPECT_EQ(check_sums_entry({1, 4 * MiB, {7}}, blocks()).error().message(), "SUMS for 1 pages at 1:0x400000 lie outside the RAM blocks");
    EXPECT_FALSE(check_sums_entry({1, 100, {7}}, blocks()));
    EXPECT_FALSE(check_sums_entry({2, 0, {7}}, blocks()));
    EXPECT_FALSE(check_sums_entry({1, 0, {}}, blocks()));
    EXPECT_FALSE(check_sums_entry({1, 0, std::vector<uint64_t>(4 * MiB / 4096 + 1)}, blocks()));
    EXPECT_FALSE(check_sums_entry({1, UINT64_MAX - 4095, {7}}, blocks()));
}

TEST(Bounds, BlockListsAndRegisterResultsMustMatchWhatWasAnnounced) {
    std::vector<BlockDesc> remote{{0x10000000, 0, 10 * MiB + 8192, 0}, {0x20000000, 1ull << 40, 4 * MiB, 0}};
    EXPECT_TRUE(check_block_lists(blocks(), remote));  // the destination's offsets are its own
    auto bigger = remote;
    bigger[1].length = 8 * MiB;
    EXPECT_EQ(check_block_lists(blocks(), bigger).error().message(),
              "RAM block 1 ('high') is 4194304 bytes here but 8388608 on the peer");
    EXPECT_FALSE(check_block_lists(blocks(), {remote[0]}));
    EXPECT_TRUE(check_register_result({1, 0x10000000}, remote[0]));
    EXPECT_EQ(check_register_result({1, 0x10000000 + 4 * MiB}, remote[0]).error().message(),
              "the destination registered a chunk of its block at 0x0 with the block at 0x10400000, not at 0x10000000 as it "
              "announced");
}

TEST(RegistrationCache, EvictsLeastRecentlyUsedFirstUnderTheLimit) {
    RegistrationCache<int> c(3 * MiB);
    c.insert({0, 0}, MiB, 100);
    c.insert({0, 1}, MiB, 101);
    c.insert({0, 2}, MiB, 102);
    EXPECT_EQ(c.used(), 3 * MiB);
    ASSERT_NE(c.find({0, 0}), nullptr);  // chunk 0 becomes the most recently used
    auto v = c.victims_for(2 * MiB);
    ASSERT_TRUE(v);
    ASSERT_EQ(v->size(), 2u);
    EXPECT_EQ((*v)[0], (ChunkKey{0, 1}));
    EXPECT_EQ((*v)[1], (ChunkKey{0, 2}));
    for (const auto& k : *v) EXPECT_TRUE(c.erase(k).has_value());
    c.insert({1, 7}, 2 * MiB, 107);
    EXPECT_EQ(c.used(), 3 * MiB);
    EXPECT_EQ(*c.find({0, 0}), 100);
    EXPECT_EQ(c.find({0, 1}), nullptr);
    EXPECT_TRUE(c.victims_for(0)->empty());
    EXPECT_EQ(c.victims_for(4 * MiB).error().message(),
              "a registration of 4194304 bytes exceeds rdma-pin-limit 3145728: raise the limit or lower x-rdma-chunk-size");
}

TEST(RegistrationCache, UnlimitedNeverEvictsAndReinsertReplaces) {
    RegistrationCache<int> c(0);
    for (uint64_t i = 0; i < 100; ++i) c.insert({0, i}, MiB, static_cast<int>(i));
    EXPECT_TRUE(c.victims_for(1ull << 40)->empty());
    c.insert({0, 5}, 2 * MiB, 555);
    EXPECT_EQ(c.size(), 100u);
    EXPECT_EQ(c.used(), 101 * MiB);
    EXPECT_EQ(*c.find({0, 5}), 555);
    EXPECT_FALSE(c.erase({9, 9}).has_value());
    c.clear();
    EXPECT_EQ(c.used(), 0u);
}

}  // namespace rdma_migrate
