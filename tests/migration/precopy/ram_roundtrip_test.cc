// RamSaver -> stream -> StreamLoader without KVM: what the source sends lands byte for byte,
// zero pages travel as markers, untouched pages are not sent at all, and a hostile record
// changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "tests/support/memory_fixture.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/ram_loader.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/transport/stream_io.h"

namespace vmm::migration {

namespace {
using test::M;
using test::make_memory;
using test::layout;

bool same_memory(const memory::GuestMemory& a, const memory::GuestMemory& b) {
    for (size_t i = 0; i < a.blocks().size(); ++i)
        if (std::memcmp(a.blocks()[i]->host(), b.blocks()[i]->host(), a.blocks()[i]->size()) != 0) return false;
    return true;
}

// A source side without KVM: RamSaver writing inline records into `wire`, unlimited.
struct Saving {
    explicit Saving(const memory::GuestMemory& m, bool zero_markers = true) : saver(m, wire, nullptr, rl, zero_markers, stats) {}
    Status bulk_round() {
        auto pagemap = memory::PagemapReader::open();
        if (!pagemap) return pagemap.error();
        return saver.bulk_round(&*pagemap);
    }
    stream::MemoryStream wire;
    RamStats stats;
    RateLimiter rl{0, nullptr};
    RamSaver saver;
};

Record end_record() {
    Record r;
    r.type = RecordType::end;
    return r;
}

// Appends STATE("state") + END so the loader accepts the stream.
void end_stream(stream::MemoryStream& out) {
    Record st;
    st.type = RecordType::state;
    st.length = 5;
    std::vector<uint8_t> blob{'s', 't', 'a', 't', 'e'};
    ASSERT_TRUE(out.write(encode_record(st)));
    ASSERT_TRUE(out.write(blob));
    ASSERT_TRUE(out.write(encode_record(end_record())));
}
}  // namespace

TEST(RamRoundTrip, BulkThenDirtyRoundLandsByteForByte) {
    auto src = make_memory();
    auto dst = make_memory();
    // Data here and there, one page that is written but zero, most pages never touched.
    for (uint64_t a : {uint64_t{0}, uint64_t{4096 * 3}, 5 * M, 16 * M + 8192}) std::memset(src.host_span(a, 4096)->data(), 0x5a, 4096);
    std::memset(src.host_span(2 * M, 4096)->data(), 0, 4096);  // populated, zero
    std::memset(dst.host_span(2 * M, 4096)->data(), 0x77, 4096);  // stale data the marker must clear
    Saving out(src);
    auto& wire = out.wire;
    auto& stats = out.stats;
    auto& saver = out.saver;
    ASSERT_TRUE(out.bulk_round());
    EXPECT_EQ(stats.normal, 4u);
    EXPECT_EQ(stats.duplicate, 1u);
    EXPECT_EQ(stats.skipped_unpopulated, 3 * 1024u - 5);
    // A dirty round: page 3 changes again, and one zero page in 'high' is marked dirty.
    std::memset(src.host_span(4096 * 3, 4096)->data(), 0x33, 4096);
    std::vector<std::vector<uint64_t>> dirty(2);
    dirty[0].assign(2 * 1024 / 64, 0);
    dirty[1].assign(1024 / 64, 0);
    dirty[0][0] = 1ull << 3;
    dirty[1][0] = 1ull << 9;
    ASSERT_TRUE(saver.dirty_round(1, dirty));
    end_stream(wire);

    stream::MemoryStream in(wire.written());
    std::vector<uint8_t> state;
    StreamLoader loader(dst, in, nullptr, layout(dst), [&](std::span<const uint8_t> s) {
        state.assign(s.begin(), s.end());
        return Status{};
    });
    ASSERT_TRUE(loader.run()) << "loader failed";
    EXPECT_TRUE(same_memory(src, dst));
    EXPECT_EQ(std::string(state.begin(), state.end()), "state");
    EXPECT_EQ(loader.counters().rounds, 2u);
    EXPECT_EQ(in.remaining(), 0u);
    // Only the data pages went over the wire as data.
    EXPECT_LT(wire.written().size(), 6 * 4096u);
}

// A run longer than one PAGES record is announced with POPULATE; the destination's helper
// prepares memory ahead and the data still lands byte for byte.
TEST(RamRoundTrip, LongRunsAreAnnouncedAndLandByteForByte) {
    auto src = make_memory();
    auto dst = make_memory();
    auto* p = src.host_span(0, 7 * M)->data();  // 7 MiB of data: two PAGES records
    for (uint64_t i = 0; i < 7 * M; ++i) p[i] = static_cast<uint8_t>(i * 31 + (i >> 12));
    Saving out(src);
    auto& wire = out.wire;
    ASSERT_TRUE(out.bulk_round());
    end_stream(wire);
    // ROUND_BEGIN, then POPULATE for the whole run, right before its first PAGES record.
    stream::MemoryStream peek(wire.written());
    auto blocks = layout(src);
    ASSERT_EQ(read_record(peek, blocks, 4096)->type, RecordType::round_begin);
    auto hint = read_record(peek, blocks, 4096);
    ASSERT_TRUE(hint);
    EXPECT_EQ(hint->type, RecordType::populate);
    EXPECT_EQ(hint->offset, 0u);
    EXPECT_EQ(hint->length, 7 * M);
    EXPECT_EQ(read_record(peek, blocks, 4096)->type, RecordType::pages);

    stream::MemoryStream in(wire.written());
    StreamLoader loader(dst, in, nullptr, layout(dst), [](std::span<const uint8_t>) { return Status{}; });
    ASSERT_TRUE(loader.run()) << "loader failed";
    EXPECT_TRUE(same_memory(src, dst));
    EXPECT_EQ(loader.counters().pages, 7 * M / 4096);
}

// A stop (postcopy's switch) ends the round after the piece under way: the round still closes,
// what went lands, and unsent() holds exactly the populated pages it did not send.
TEST(RamRoundTrip, AStopCutsTheRoundShortAndKeepsWhatItDidNotSend) {
    auto src = make_memory();
    auto dst = make_memory();
    std::memset(src.host_span(0, 7 * M)->data(), 0x5a, 7 * M);         // two pieces: 4 MiB, then 3
    std::memset(src.host_span(16 * M + 8192, 4096)->data(), 0x33, 4096);  // one page in "high"
    Saving out(src);
    out.saver.stop_when([&] { return out.stats.normal > 0; });  // the first piece goes, then stop
    ASSERT_TRUE(out.bulk_round());
    ASSERT_TRUE(out.saver.cut_short());
    const auto& unsent = out.saver.unsent();
    ASSERT_EQ(unsent.size(), 2u);
    uint64_t sent_pages = 4 * M / 4096, data_pages = 7 * M / 4096;
    for (uint64_t p = 0; p < 2048; ++p) {
        bool expected = p >= sent_pages && p < data_pages;
        ASSERT_EQ((unsent[0][p / 64] >> (p % 64)) & 1, expected ? 1u : 0u) << "pc.ram page " << p;
    }
    for (uint64_t p = 0; p < 1024; ++p) {  // "high": only its one populated page
        ASSERT_EQ((unsent[1][p / 64] >> (p % 64)) & 1, p == 2 ? 1u : 0u) << "high page " << p;
    }
    EXPECT_EQ(out.stats.normal, sent_pages);
    end_stream(out.wire);
    stream::MemoryStream in(out.wire.written());
    StreamLoader loader(dst, in, nullptr, layout(dst), [](std::span<const uint8_t>) { return Status{}; });
    ASSERT_TRUE(loader.run()) << "loader failed";
    EXPECT_EQ(loader.counters().rounds, 1u);
    EXPECT_EQ(std::memcmp(dst.host_span(0, 4 * M)->data(), src.host_span(0, 4 * M)->data(), 4 * M), 0);
    EXPECT_EQ(dst.host_span(4 * M, 4096)->data()[0], 0) << "a page after the stop was sent";
    // The next round starts whole again.
    std::vector<std::vector<uint64_t>> dirty{std::vector<uint64_t>(2048 / 64, 0), std::vector<uint64_t>(1024 / 64, 0)};
    out.saver.stop_when(nullptr);
    ASSERT_TRUE(out.saver.dirty_round(1, dirty));
    EXPECT_FALSE(out.saver.cut_short());
}

TEST(RamRoundTrip, ZeroBlocksOffSendsZeroPagesAsData) {
    auto src = make_memory();
    std::memset(src.host_span(0, 4096)->data(), 0, 4096);
    Saving out(src, false);
    ASSERT_TRUE(out.bulk_round());
    EXPECT_EQ(out.stats.duplicate, 0u);
    EXPECT_EQ(out.stats.normal, 1u);
}

// A RAM channel that confirms asynchronously, as RDMA WRITE does: the last `window` bytes it
// accepted are in flight until the round ends, which waits for them 1 MiB at a time and says
// so each time.
struct AsyncChannel final : SourceRamChannel {
    Status begin_round(uint32_t) override { return {}; }
    Status send(uint32_t, uint64_t offset, uint64_t length) override {
        sends.push_back({offset, length});
        accepted += length;
        arrived = accepted > window ? accepted - window : 0;
        return {};
    }
    Status send_zero(uint32_t, uint64_t, uint64_t) override { return {}; }
    Status end_round() override {
        while (arrived < accepted) {
            arrived = std::min(accepted, arrived + M);
            if (arrival) arrival();
        }
        return {};
    }
    uint64_t in_flight() const override { return accepted - arrived; }
    void on_arrival(std::function<void()> fn) override { arrival = std::move(fn); }
    std::function<void()> arrival;
    uint64_t window = 3 * M;
    uint64_t accepted = 0, arrived = 0;
    std::vector<std::pair<uint64_t, uint64_t>> sends;  // offset, length
};

// A run that starts mid-way through RAM reaches the channel in pieces that end on 4 MiB
// boundaries, so no RDMA chunk (a power of two up to 4 MiB) is split into two writes.
TEST(RamRoundTrip, PiecesEndOnFourMiBBoundariesWhereverTheRunStarts) {
    auto src = make_memory();
    std::memset(src.host_span(0, 4096)->data(), 0, 4096);  // page 0 zero: the data run starts at page 1
    std::memset(src.host_span(4096, 8 * M - 4096)->data(), 0x5a, 8 * M - 4096);
    stream::MemoryStream wire;
    RamStats stats;
    RateLimiter rl{0, nullptr};
    AsyncChannel ch;
    RamSaver saver(src, wire, &ch, rl, true, stats);
    auto pagemap = memory::PagemapReader::open();
    ASSERT_TRUE(pagemap);
    ASSERT_TRUE(saver.bulk_round(&*pagemap));
    using Piece = std::pair<uint64_t, uint64_t>;
    EXPECT_EQ(ch.sends, (std::vector<Piece>{{4096, 4 * M - 4096}, {4 * M, 4 * M}}));
}

// `transferred` counts what has arrived, never what the channel holds in flight; once the
// round has ended, everything sent.
TEST(RamRoundTrip, TransferredCountsWhatArrivedNotWhatIsInFlight) {
    auto src = make_memory();
    std::memset(src.host_span(0, 8 * M)->data(), 0x5a, 8 * M);
    stream::MemoryStream wire;
    RamStats stats;
    RateLimiter rl{0, nullptr};
    AsyncChannel ch;
    RamSaver saver(src, wire, &ch, rl, true, stats);
    struct Seen {
        uint64_t transferred, arrived, accepted;  // arrived and accepted include the stream's bytes
    };
    std::vector<Seen> seen;  // at each progress call, while the round runs
    saver.on_progress([&] {
        seen.push_back({stats.transferred, wire.written().size() + ch.arrived, wire.written().size() + ch.accepted});
    });
    auto pagemap = memory::PagemapReader::open();
    ASSERT_TRUE(pagemap);
    ASSERT_TRUE(saver.bulk_round(&*pagemap));
    ASSERT_FALSE(seen.empty());
    // At the round's start: nothing yet. While sending: the window in flight is not counted.
    // While the round waits for it: one report per MiB that arrives, the last with nothing in flight.
    ASSERT_EQ(seen.size(), 1u + 2u + 3u);
    for (const Seen& x : seen) EXPECT_EQ(x.transferred, x.arrived);
    EXPECT_EQ(seen[0].accepted, 0u);
    for (size_t i = 1; i < 3; ++i) EXPECT_EQ(seen[i].accepted - seen[i].transferred, ch.window);
    for (size_t i = 3; i < seen.size(); ++i) EXPECT_EQ(seen[i].accepted - seen[i].transferred, ch.window - (i - 2) * M);
    EXPECT_EQ(ch.accepted, 8 * M);
    EXPECT_EQ(stats.transferred, saver.bytes_sent());
    EXPECT_EQ(stats.transferred, wire.written().size() + 8 * M);
    EXPECT_EQ(stats.in_flight, 0u);
}

struct Hostile {
    const char* what;
    std::vector<Record> records;
    const char* error;
};

TEST(RamRoundTrip, InvalidStreamsFailAndWriteNothingForTheBadRecord) {
    const Hostile cases[] = {
        {"pages outside a round", {{RecordType::pages, 0, 0, 4096, 0}}, "migration stream: PAGES outside a RAM round"},
        {"end without state", {end_record()}, "migration stream: END before the device state"},
        {"nested round", {{RecordType::round_begin, 0, 0, 0, 1}, {RecordType::round_begin, 0, 0, 0, 2}},
         "migration stream: round 2 began inside round 1"},
        {"mismatched round end", {{RecordType::round_begin, 0, 0, 0, 1}, {RecordType::round_end, 0, 0, 0, 2}},
         "migration stream: end of round 2 without its beginning"},
        {"page beyond the block", {{RecordType::round_begin, 0, 0, 0, 1}, {RecordType::pages, 1, 4 * M, 4096, 0}},
         "migration stream: range 0x400000+0x1000 lies outside RAM block 'high' (4 MiB)"},
        {"truncated data", {{RecordType::round_begin, 0, 0, 0, 1}, {RecordType::pages, 0, 0, 8192, 0}},
         "the migration stream ended early (truncated)"},
        {"populate outside a round", {{RecordType::populate, 0, 0, 8192, 0}}, "migration stream: POPULATE outside a RAM round"},
        {"populate beyond the block", {{RecordType::round_begin, 0, 0, 0, 1}, {RecordType::populate, 1, 0, 8 * M, 0}},
         "migration stream: range 0x0+0x800000 lies outside RAM block 'high' (4 MiB)"},
    };
    for (const auto& c : cases) {
        auto dst = make_memory();
        stream::MemoryStream wire;
        for (const auto& r : c.records) ASSERT_TRUE(wire.write(encode_record(r)));
        stream::MemoryStream in(wire.written());
        StreamLoader loader(dst, in, nullptr, layout(dst), [](std::span<const uint8_t>) { return Status{}; });
        auto s = loader.run();
        ASSERT_FALSE(s) << c.what;
        EXPECT_EQ(s.error().message(), c.error) << c.what;
        EXPECT_EQ(loader.counters().pages, 0u) << c.what;
    }
}

}  // namespace vmm::migration
