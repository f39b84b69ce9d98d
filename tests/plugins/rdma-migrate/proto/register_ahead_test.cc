// RegisterAhead: the source's registration pipeline, driven as Session drives it (ask a group,
// write the group answered before it) against a fake destination that registers what it is
// asked for.
#include "proto/register_ahead.h"

#include <gtest/gtest.h>

#include "vmm/common/units.h"

#include <map>

namespace rdma_migrate {

namespace {
using vmm::MiB;

// Session's loop without verbs: `registered` is what the destination has answered so far.
struct Driver {
    explicit Driver(size_t group) : ahead(group) {}
    RegisterAhead ahead;
    std::set<ChunkKey> registered;
    std::vector<ChunkKey> asking;
    std::vector<std::vector<ChunkKey>> asks;       // every REGISTER REQUEST, in order
    std::vector<QueuedPiece> written;              // every write, in order
    std::vector<size_t> written_when_asked;        // writes posted before each ask
    std::map<ChunkKey, size_t> asked_count;

    RegisterAhead::Registered known() {
        return [this](const ChunkKey& k) { return registered.count(k) != 0; };
    }
    void post_ready() {
        for (auto& q : ahead.take_ready(known())) written.push_back(q);
    }
    void step(bool final) {
        for (const auto& k : asking) registered.insert(k);  // the answer arrives
        asking.clear();
        if (ahead.ask_due(final)) {
            asking = ahead.take_ask();
            asks.push_back(asking);
            written_when_asked.push_back(written.size());
            for (const auto& k : asking) ++asked_count[k];
        }
        post_ready();
    }
    void send(uint32_t block, uint64_t offset, uint64_t length) {
        ahead.add(block, split_by_chunk(*ChunkGeometry::make(MiB), offset, length), known());
        post_ready();
        while (ahead.ask_due(false)) step(false);
    }
    void end_round() {
        while (!asking.empty() || ahead.ask_due(true)) step(true);
        post_ready();
    }
};
}  // namespace

TEST(RegisterAhead, WritesEverythingInOrderAskingEachChunkOnce) {
    Driver d(4);
    for (uint64_t at = 0; at < 40 * MiB; at += 4 * MiB) d.send(0, at, 4 * MiB);  // the saver's 4 MiB pieces
    d.send(1, MiB / 2, MiB);  // straddles two chunks of another block
    d.end_round();
    EXPECT_TRUE(d.ahead.empty());
    ASSERT_EQ(d.written.size(), 42u);
    for (uint64_t c = 0; c < 40; ++c) {
        EXPECT_EQ(d.written[c].block, 0u);
        EXPECT_EQ(d.written[c].piece.chunk, c);
        EXPECT_EQ(d.written[c].piece.offset, c * MiB);
    }
    EXPECT_EQ(d.written[40].piece.offset, MiB / 2);
    EXPECT_EQ(d.written[41].piece.offset, MiB);
    for (const auto& [k, n] : d.asked_count) EXPECT_EQ(n, 1u) << k.block << ":" << k.chunk;
    EXPECT_EQ(d.asked_count.size(), 42u);
    // Groups of 4, the rest at the end of the round.
    ASSERT_EQ(d.asks.size(), 11u);
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(d.asks[i].size(), 4u);
    EXPECT_EQ(d.asks[10].size(), 2u);
}

TEST(RegisterAhead, TheNextGroupIsAskedBeforeThisGroupIsWritten) {
    Driver d(4);
    for (uint64_t at = 0; at < 16 * MiB; at += 4 * MiB) d.send(0, at, 4 * MiB);
    d.end_round();
    // Ask g1 with nothing written; ask g2 before g1's writes; ask g3 before g2's, and so on:
    // the destination pins one group while the one before it is on the wire.
    ASSERT_EQ(d.written_when_asked.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(d.written_when_asked[i], 4 * (i > 0 ? i - 1 : 0)) << "ask " << i;
}

TEST(RegisterAhead, RegisteredChunksAreWrittenAtOnceAndNeverAskedAgain) {
    Driver d(8);
    for (uint64_t c = 0; c < 4; ++c) d.registered.insert({0, c});  // a dirty round after the bulk one
    d.send(0, 0, 2 * MiB);
    EXPECT_EQ(d.written.size(), 2u);  // no round trip, no waiting for the round's end
    EXPECT_TRUE(d.asks.empty());
    d.send(0, 6 * MiB, MiB);  // chunk 6 is new: it waits for its group
    d.send(0, 3 * MiB, MiB);  // registered, but written after chunk 6: order is kept
    EXPECT_EQ(d.written.size(), 2u);
    d.end_round();
    ASSERT_EQ(d.asks.size(), 1u);
    EXPECT_EQ(d.asks[0], (std::vector<ChunkKey>{{0, 6}}));
    ASSERT_EQ(d.written.size(), 4u);
    EXPECT_EQ(d.written[2].piece.chunk, 6u);
    EXPECT_EQ(d.written[3].piece.chunk, 3u);
}

TEST(RegisterAhead, PiecesOfOneChunkFromSeveralRangesAskItOnce) {
    Driver d(2);
    d.send(0, 0, 4096);
    d.send(0, 8192, 4096);  // same chunk 0
    d.send(0, MiB + 4096, 4096);
    d.end_round();
    ASSERT_EQ(d.asks.size(), 1u);
    EXPECT_EQ(d.asks[0].size(), 2u);
    EXPECT_EQ(d.written.size(), 3u);
}

TEST(RegisterAhead, GroupIsBoundedByTheSpecsRepeatLimit) {
    RegisterAhead a(1u << 20);
    std::vector<Piece> pieces;
    for (uint64_t c = 0; c < kMaxRepeat + 10; ++c) pieces.push_back({c, c * 4096, 4096});
    a.add(0, pieces, [](const ChunkKey&) { return false; });
    EXPECT_TRUE(a.ask_due(false));
    EXPECT_EQ(a.take_ask().size(), kMaxRepeat);
    EXPECT_FALSE(a.ask_due(false));
    EXPECT_EQ(a.take_ask().size(), 10u);
}

}  // namespace rdma_migrate
