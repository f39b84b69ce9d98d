// The destination's checks of sums a RAM channel delivers while its round runs (the RDMA
// plugin's SUMS): done on the checker's thread, waited for at the round's end, refused when the
// range lies outside guest RAM.
#include "vmm/migration/precopy/channel_checker.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/support/memory_fixture.h"
#include "vmm/migration/precopy/resume.h"

namespace vmm::migration {

namespace {
using test::M;
using test::layout;
using test::make_memory;

std::vector<uint64_t> sums_of(const uint8_t* host, size_t pages) {
    std::vector<uint64_t> out(pages);
    for (size_t i = 0; i < pages; ++i) out[i] = page_checksum(host + i * kStreamPageSize);
    return out;
}
}  // namespace

TEST(ChannelChecker, MatchingSumsAreCheckedAndAMismatchIsOwedUntilItsNextCopy) {
    auto mem = make_memory();
    uint8_t* high = mem.blocks()[1]->host();
    std::memset(high, 0x5a, 64 * kStreamPageSize);
    RamVerifier verifier(layout(mem));
    {
        ChannelChecker checker(mem, verifier);
        ASSERT_TRUE(checker.add(1, 0, sums_of(high, 64), 0));
        auto wrong = sums_of(high + 64 * kStreamPageSize, 2);
        wrong[1] ^= 1;  // as if page 65 had been corrupted on the way
        ASSERT_TRUE(checker.add(1, 64 * kStreamPageSize, wrong, 0));
        checker.drain();
        EXPECT_EQ(verifier.checked_bytes(), 66 * kStreamPageSize);
        EXPECT_EQ(verifier.mismatches(), 1u);
        auto s = verifier.settle();
        ASSERT_FALSE(s);
        EXPECT_NE(s.error().message().find("RAM block 'high' offset 0x41000"), std::string::npos) << s.error().message();
        // Its next copy (a later round) matches: nothing is owed any more.
        ASSERT_TRUE(checker.add(1, 65 * kStreamPageSize, sums_of(high + 65 * kStreamPageSize, 1), 1));
        checker.drain();
        EXPECT_TRUE(verifier.settle());
    }
}

TEST(ChannelChecker, RangesOutsideGuestRamAreRefusedBeforeAnythingIsRead) {
    auto mem = make_memory();
    RamVerifier verifier(layout(mem));
    ChannelChecker checker(mem, verifier);
    std::vector<uint64_t> one{0};
    EXPECT_EQ(checker.add(1, 4 * M, one, 0).error().message(),
              "verify-ram: the transport delivered sums for 1 pages at 1:0x400000, outside the RAM blocks");
    EXPECT_FALSE(checker.add(2, 0, one, 0));
    EXPECT_FALSE(checker.add(0, 100, one, 0));
    EXPECT_FALSE(checker.add(0, 0, {}, 0));
    EXPECT_FALSE(checker.add(0, 0, std::vector<uint64_t>(8 * M / kStreamPageSize + 1), 0));
    EXPECT_FALSE(checker.add(0, UINT64_MAX - kStreamPageSize + 1, one, 0));
    checker.drain();
    EXPECT_EQ(verifier.checked_bytes(), 0u);
}

TEST(ChannelChecker, DrainWaitsForEveryQueuedCheckAndCountsWhatWasLeft) {
    auto mem = make_memory();
    RamVerifier verifier(layout(mem));
    ChannelChecker checker(mem, verifier);
    const uint8_t* ram = mem.blocks()[0]->host();
    for (uint64_t at = 0; at < 8 * M; at += 256 * kStreamPageSize) ASSERT_TRUE(checker.add(0, at, sums_of(ram + at, 256), 0));
    checker.drain();
    EXPECT_EQ(verifier.checked_bytes(), 8 * M);  // all of it, whatever was left when drain began
    EXPECT_LE(checker.late_bytes(), 8 * M);
    EXPECT_TRUE(verifier.settle());
    uint64_t late = checker.late_bytes();
    checker.drain();  // nothing queued: nothing more is late
    EXPECT_EQ(checker.late_bytes(), late);
}

// A resumable precopy hears which pages matched, in their round: the runs around a page that
// did not, and nothing for it (its last copy did not arrive whole, so a resumption sends it).
// What was queued when the link broke is checked before the destination reports what it holds.
TEST(ChannelChecker, PagesThatMatchedArriveInTheirRoundAndAMismatchDoesNot) {
    auto mem = make_memory();
    uint8_t* high = mem.blocks()[1]->host();
    std::memset(high, 0x77, 16 * kStreamPageSize);
    RamVerifier verifier(layout(mem));
    ArrivalRounds arrivals(layout(mem));
    ChannelChecker checker(mem, verifier);
    checker.on_checked([&](uint32_t block, uint64_t first, uint64_t count, uint32_t round) {
        arrivals.landed(block, first, count, round);
    });
    auto sums = sums_of(high, 16);
    sums[5] ^= 1;
    ASSERT_TRUE(checker.add(1, 0, sums, 3));
    checker.finish_queued();
    EXPECT_EQ(checker.late_bytes(), 0u);  // not a round's end
    const auto& r = arrivals.rounds()[1];
    for (uint64_t p = 0; p < 16; ++p) EXPECT_EQ(r[p], p == 5 ? kNeverArrived : 3u) << "page " << p;
    EXPECT_EQ(r[16], kNeverArrived);
    EXPECT_EQ(arrivals.rounds()[0][0], kNeverArrived);
    // The verifier still owes page 5: a report built now must not vouch for it, whatever else
    // said its round was served (the channel's whole-round word).
    arrivals.landed(1, 0, 16, 3);
    verifier.for_each_owed([&](uint32_t block, uint64_t page) { arrivals.unarrived(block, page); });
    EXPECT_EQ(arrivals.rounds()[1][5], kNeverArrived);
    EXPECT_EQ(arrivals.rounds()[1][4], 3u);
}

}  // namespace vmm::migration
