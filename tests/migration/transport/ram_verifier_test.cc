// verify-ram without KVM: a RamSaver that sums its pages, a StreamLoader that checks them, and
// the rule that tells a page the guest rewrote in flight (sent again: settled) from corruption
// (never sent again: the migration fails, naming the block and offset).
#include <gtest/gtest.h>

#include <cstring>

#include "tests/support/memory_fixture.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/ram_loader.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/transport/ram_verifier.h"

namespace vmm::migration {

namespace {
using test::M;
using test::make_memory;
using test::layout;
constexpr uint64_t P = 4096;

void put(stream::MemoryStream& s, const std::vector<uint8_t>& bytes) { ASSERT_TRUE(s.write(bytes)); }

void round_marker(stream::MemoryStream& s, RecordType t, uint32_t round) {
    Record r;
    r.type = t;
    r.round = round;
    put(s, encode_record(r));
}

// A PAGES_SUMMED record for `data` at pc.ram+offset; `corrupt_at` flips a byte of the data
// after the sums were taken (as if the wire had changed it).
void summed(stream::MemoryStream& s, uint64_t offset, std::vector<uint8_t> data, size_t corrupt_at = SIZE_MAX) {
    Record r;
    r.type = RecordType::pages_summed;
    r.offset = offset;
    r.length = data.size();
    auto header = encode_record(r);
    append_page_sums(header, data);
    if (corrupt_at < data.size()) data[corrupt_at] ^= 0xff;
    put(s, header);
    put(s, data);
}

// STATE, then END (or POSTCOPY: the switch).
void finish(stream::MemoryStream& s, RecordType last = RecordType::end) {
    Record st;
    st.type = RecordType::state;
    st.length = 1;
    put(s, encode_record(st));
    put(s, {0});
    Record end;
    end.type = last;
    put(s, encode_record(end));
}

Status load(const memory::GuestMemory& dst, const stream::MemoryStream& wire, RamVerifier* verifier) {
    stream::MemoryStream in(wire.written());
    StreamLoader loader(dst, in, nullptr, layout(dst), [](std::span<const uint8_t>) { return Status{}; }, verifier);
    return loader.run();
}
}  // namespace

TEST(RamVerifier, SummedRoundsFromTheSaverLandAndCheckByteForByte) {
    auto src = make_memory(), dst = make_memory();
    for (uint64_t i = 0; i < 6 * M; ++i) src.blocks()[0]->host()[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
    stream::MemoryStream wire;
    RamStats stats;
    RateLimiter rl{0, nullptr};
    RamSaver saver(src, wire, nullptr, rl, true, stats, RamSaver::Verify::summed);
    auto pagemap = memory::PagemapReader::open();
    ASSERT_TRUE(pagemap);
    ASSERT_TRUE(saver.bulk_round(&*pagemap));
    finish(wire);
    RamVerifier verifier(layout(dst));
    ASSERT_TRUE(load(dst, wire, &verifier));
    EXPECT_EQ(std::memcmp(src.blocks()[0]->host(), dst.blocks()[0]->host(), 8 * M), 0);
    EXPECT_EQ(verifier.checked_bytes(), stats.normal_bytes);
    EXPECT_EQ(verifier.mismatches(), 0u);
    EXPECT_FALSE(load(dst, wire, nullptr)) << "summed records in a stream that did not announce verify-ram";
}

TEST(RamVerifier, APageThatDiffersAndIsNeverSentAgainFailsTheMigrationByName) {
    auto dst = make_memory();
    stream::MemoryStream wire;
    round_marker(wire, RecordType::round_begin, 0);
    summed(wire, 2 * M, std::vector<uint8_t>(4 * P, 0x5a), 2 * P + 17);  // the third page
    round_marker(wire, RecordType::round_end, 0);
    finish(wire);
    RamVerifier verifier(layout(dst));
    auto s = load(dst, wire, &verifier);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message().rfind("RAM verification failed: RAM block 'pc.ram' offset 0x202000 (+0x1000) arrived "
                                        "different from what the source read",
                                        0),
              0u)
        << s.error().message();
    EXPECT_EQ(verifier.mismatches(), 1u);
}

TEST(RamVerifier, APageRewrittenInFlightIsSettledByItsNextCopyAndOnlyThatPageIsOwed) {
    auto dst = make_memory();
    stream::MemoryStream wire;
    round_marker(wire, RecordType::round_begin, 0);
    summed(wire, 0, std::vector<uint8_t>(8 * P, 1), 5 * P);  // page 5 arrives newer than its sum
    round_marker(wire, RecordType::round_end, 0);
    round_marker(wire, RecordType::round_begin, 1);
    summed(wire, 5 * P, std::vector<uint8_t>(P, 2));  // the guest's write made it dirty: sent again
    round_marker(wire, RecordType::round_end, 1);
    finish(wire);
    RamVerifier verifier(layout(dst));
    EXPECT_TRUE(load(dst, wire, &verifier));
    EXPECT_EQ(verifier.mismatches(), 1u);
}

// A page the guest rewrote while it was read, still owed when postcopy takes over: its DISCARD
// drops it (postcopy brings it again, summed), so the switch does not fail on it; a page owed
// outside the discards still does. (Found over RDMA, where the adapter reads guest RAM late.)
TEST(RamVerifier, ADiscardAtTheSwitchDropsWhatPrecopyStillOwed) {
    for (bool covered : {true, false}) {
        auto dst = make_memory();
        stream::MemoryStream wire;
        round_marker(wire, RecordType::round_begin, 0);
        summed(wire, 0, std::vector<uint8_t>(8 * P, 1), 5 * P);
        round_marker(wire, RecordType::round_end, 0);
        Record discard;
        discard.type = RecordType::discard;
        discard.offset = covered ? 4 * P : 6 * P;
        discard.length = 2 * P;
        put(wire, encode_record(discard));
        finish(wire, RecordType::postcopy);
        RamVerifier verifier(layout(dst));
        stream::MemoryStream in(wire.written());
        StreamLoader loader(dst, in, nullptr, layout(dst), [](std::span<const uint8_t>) { return Status{}; }, &verifier);
        loader.allow_postcopy();
        auto s = loader.run();
        EXPECT_EQ(static_cast<bool>(s), covered) << (s ? "" : s.error().message());
    }
}

TEST(RamVerifier, AZeroMarkerAlsoSettlesAnOwedPage) {
    RamVerifier v({{"pc.ram", 0, 8 * M}});
    std::vector<uint8_t> data(3 * P, 9);
    std::vector<uint8_t> sums_bytes;
    append_page_sums(sums_bytes, data);
    std::vector<uint64_t> sums(3);
    std::memcpy(sums.data(), sums_bytes.data(), sums_bytes.size());
    data[P] = 0;  // the middle page differs
    v.check(0, 16 * P, data, sums);
    ASSERT_FALSE(v.settle());
    v.replaced(0, 0, 16 * P);  // before it: nothing settled
    ASSERT_FALSE(v.settle());
    v.replaced(0, 17 * P, P);
    EXPECT_TRUE(v.settle());
}

TEST(RamVerifier, UnsummedPagesAreRefusedOnceVerifyRamWasAnnounced) {
    auto dst = make_memory();
    stream::MemoryStream wire;
    round_marker(wire, RecordType::round_begin, 0);
    Record r;
    r.type = RecordType::pages;
    r.length = P;
    put(wire, encode_record(r));
    put(wire, std::vector<uint8_t>(P, 3));
    RamVerifier verifier(layout(dst));
    auto s = load(dst, wire, &verifier);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message(), "migration stream: PAGES without a checksum, but the source announced verify-ram");
}

}  // namespace vmm::migration
