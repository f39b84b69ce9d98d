// Chunk arithmetic, bounds checks against hostile entries, and the LRU registration cache.
#include "chunks.h"

#include <gtest/gtest.h>

#include "registration_cache.h"

namespace rdma_migrate {

namespace {
constexpr uint64_t M = 1 << 20;
std::vector<LocalBlock> blocks() { return {{"pc.ram", nullptr, 10 * M + 8192, 0}, {"high", nullptr, 4 * M, 1ull << 32}}; }
ChunkGeometry g1m() { return *ChunkGeometry::make(M); }
}  // namespace

TEST(Chunks, SizeMustBeAPowerOfTwoIn4KTo1G) {
    EXPECT_TRUE(ChunkGeometry::make(4096));
    EXPECT_TRUE(ChunkGeometry::make(1ull << 30));
    for (uint64_t bad : {uint64_t{0}, uint64_t{2048}, uint64_t{3 * M}, uint64_t{2ull << 30}}) EXPECT_FALSE(ChunkGeometry::make(bad)) << bad;
    EXPECT_EQ(ChunkGeometry::make(3 * M).error().message(),
              "rdma-chunk-size 3145728 must be a power of two from 4096 (4K) to 1073741824 (1G)");
}

TEST(Chunks, ArithmeticAndThePartialLastChunk) {
    auto g = g1m();
    uint64_t len = 10 * M + 8192;
    EXPECT_EQ(g.count(len), 11u);
    EXPECT_EQ(g.index(10 * M + 4096), 10u);
    EXPECT_EQ(g.start(3), 3 * M);
    EXPECT_EQ(g.length(len, 9), M);
    EXPECT_EQ(g.length(len, 10), 8192u);
    EXPECT_EQ(g.length(len, 11), 0u);
}

TEST(Chunks, RangesSplitAtChunkBoundariesOnly) {
    auto g = g1m();
    auto p = split_by_chunk(g, M - 8192, 2 * M + 16384);
    ASSERT_EQ(p.size(), 4u);
    EXPECT_EQ(p[0].chunk, 0u);
    EXPECT_EQ(p[0].length, 8192u);
    EXPECT_EQ(p[1].offset, M);
    EXPECT_EQ(p[1].length, M);
    EXPECT_EQ(p[3].chunk, 3u);
    EXPECT_EQ(p[3].length, 8192u);
    EXPECT_EQ(split_by_chunk(g, 4096, 8192).size(), 1u);  // contiguous pages in one chunk: one write
    EXPECT_TRUE(split_by_chunk(g, 0, 0).empty());
}

TEST(Bounds, RegisterRequestsMustNameChunksInsideALocalBlock) {
    auto g = g1m();
    auto ok = check_chunk_range({0, 10, 1}, blocks(), g);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->offset, 10 * M);
    EXPECT_EQ(ok->length, 8192u);  // clipped to the block's end
    EXPECT_EQ(check_chunk_range({2, 0, 1}, blocks(), g).error().message(), "RDMA request names RAM block 2 (there are 2)");
    EXPECT_EQ(check_chunk_range({0, 11, 1}, blocks(), g).error().message(),
              "RDMA request names chunks 11+1 of 'pc.ram', which has 11");
    EXPECT_FALSE(check_chunk_range({0, 5, 7}, blocks(), g));
    EXPECT_FALSE(check_chunk_range({0, 1, UINT64_MAX}, blocks(), g));  // first + count overflows
    EXPECT_FALSE(check_chunk_range({0, 0, 0}, blocks(), g));
}

TEST(Bounds, CompressEntriesMustBeWholePagesInsideABlock) {
    EXPECT_TRUE(check_compress({0, 1, 0, 4 * M}, blocks()));
    EXPECT_EQ(check_compress({0, 1, 4 * M, 4096}, blocks()).error().message(),
              "RDMA COMPRESS range 0x400000+0x1000 is not whole pages inside 'high'");
    EXPECT_FALSE(check_compress({0, 0, 100, 4096}, blocks()));
    EXPECT_FALSE(check_compress({0, 0, 4096, UINT64_MAX - 4095}, blocks()));
    EXPECT_FALSE(check_compress({0, 0, 0, 0}, blocks()));
    EXPECT_FALSE(check_compress({0, 9, 0, 4096}, blocks()));
}

TEST(Bounds, BlockListsAndRegisterResultsMustMatchWhatWasAnnounced) {
    std::vector<BlockDesc> remote{{"pc.ram", 0x10000000, 0, 10 * M + 8192, 0}, {"high", 0x20000000, 1ull << 32, 4 * M, 0}};
    EXPECT_TRUE(check_block_lists(blocks(), remote));
    auto bigger = remote;
    bigger[1].length = 8 * M;
    EXPECT_EQ(check_block_lists(blocks(), bigger).error().message(),
              "RAM block 1 is 'high' (4194304 bytes at 0x100000000) here but 'high' (8388608 bytes at 0x100000000) on the peer");
    EXPECT_FALSE(check_block_lists(blocks(), {remote[0]}));
    auto g = g1m();
    EXPECT_TRUE(check_register_result({1, 0x10000000 + 3 * M}, remote[0], g, 3));
    EXPECT_EQ(check_register_result({1, 0x10000000 + 4 * M}, remote[0], g, 3).error().message(),
              "the destination registered chunk 3 of 'pc.ram' at 0x10400000, not at 0x10300000 as announced");
    EXPECT_FALSE(check_register_result({1, 0x10000000 + 11 * M}, remote[0], g, 11));
}

TEST(RegistrationCache, EvictsLeastRecentlyUsedFirstUnderTheLimit) {
    RegistrationCache<int> c(3 * M);
    c.insert({0, 0}, M, 100);
    c.insert({0, 1}, M, 101);
    c.insert({0, 2}, M, 102);
    EXPECT_EQ(c.used(), 3 * M);
    ASSERT_NE(c.find({0, 0}), nullptr);  // chunk 0 becomes the most recently used
    auto v = c.victims_for(2 * M);
    ASSERT_TRUE(v);
    ASSERT_EQ(v->size(), 2u);
    EXPECT_EQ((*v)[0], (ChunkKey{0, 1}));
    EXPECT_EQ((*v)[1], (ChunkKey{0, 2}));
    for (const auto& k : *v) EXPECT_TRUE(c.erase(k).has_value());
    c.insert({1, 7}, 2 * M, 107);
    EXPECT_EQ(c.used(), 3 * M);
    EXPECT_EQ(*c.find({0, 0}), 100);
    EXPECT_EQ(c.find({0, 1}), nullptr);
    EXPECT_TRUE(c.victims_for(0)->empty());
    EXPECT_EQ(c.victims_for(4 * M).error().message(),
              "a registration of 4194304 bytes exceeds rdma-pin-limit 3145728: raise the limit or lower rdma-chunk-size");
}

TEST(RegistrationCache, UnlimitedNeverEvictsAndReinsertReplaces) {
    RegistrationCache<int> c(0);
    for (uint64_t i = 0; i < 100; ++i) c.insert({0, i}, M, static_cast<int>(i));
    EXPECT_TRUE(c.victims_for(1ull << 40)->empty());
    c.insert({0, 5}, 2 * M, 555);
    EXPECT_EQ(c.size(), 100u);
    EXPECT_EQ(c.used(), 101 * M);
    EXPECT_EQ(*c.find({0, 5}), 555);
    EXPECT_FALSE(c.erase({9, 9}).has_value());
    c.clear();
    EXPECT_EQ(c.used(), 0u);
}

}  // namespace rdma_migrate
