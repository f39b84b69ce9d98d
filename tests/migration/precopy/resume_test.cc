// A precopy resumed after a broken link: the destination's rounds reach the source whole and in
// order; a report that skips, repeats or claims a round the source never began is refused; and
// the pages sent again are exactly those whose current contents did not arrive.
#include "vmm/migration/precopy/resume.h"

#include <gtest/gtest.h>

#include "vmm/migration/transport/stream_io.h"
#include "vmm/stream/byte_stream.h"

namespace vmm::migration {
namespace {

// 'big' spans more pages than one RECEIVED_ROUNDS may carry, so it takes two messages.
const std::vector<BlockInfo> kResumeBlocks = {{"pc.ram", 0, (uint64_t{kMaxRoundsPages} + 70) * 4096},
                                        {"high", uint64_t{8} << 30, 70 * 4096}};

std::vector<uint64_t> resume_pages() { return {kMaxRoundsPages + 70, 70}; }

Result<ReportedRounds> collect_rounds(const std::vector<std::vector<uint8_t>>& messages, uint32_t last_round) {
    std::vector<uint8_t> bytes;
    for (const auto& m : messages) bytes.insert(bytes.end(), m.begin(), m.end());
    stream::MemoryStream in(bytes);
    ReportedRounds got(resume_pages(), last_round);
    while (!got.complete()) {
        auto m = read_return(in, kResumeBlocks, 4096);
        if (!m) return m.error();
        if (auto s = got.add(m->message, m->rounds); !s) return s.error();
    }
    if (in.remaining() != 0) return Error("bytes left over");
    return got;
}

bool resend_bit(const std::vector<std::vector<uint64_t>>& bits, size_t b, uint64_t p) { return (bits[b][p / 64] >> (p % 64)) & 1; }

TEST(PrecopyResume, TheSourceLearnsTheRoundEachPageArrivedIn) {
    ArrivalRounds arrived(kResumeBlocks);
    arrived.landed(0, 0, 10, 0);
    arrived.landed(0, 5, 2, 3);
    arrived.landed(0, kMaxRoundsPages + 1, 4, 2);  // in the second message
    arrived.landed(1, 69, 1, 1);
    auto messages = arrived.encode();
    ASSERT_EQ(messages.size(), 3u);
    auto got = collect_rounds(messages, 3);
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(got->rounds(), arrived.rounds());
    EXPECT_EQ(got->rounds()[0][6], 3u);
    EXPECT_EQ(got->rounds()[0][10], kNeverArrived);
    EXPECT_EQ(got->rounds()[1][69], 1u);
}

TEST(PrecopyResume, AReportThatClaimsARoundNotYetBegunIsALie) {
    ArrivalRounds arrived(kResumeBlocks);
    arrived.landed(1, 3, 1, 5);
    auto got = collect_rounds(arrived.encode(), 4);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message().find("arrived in round 5"), std::string::npos) << got.error().message();
}

TEST(PrecopyResume, AReportOutOfOrderOrRepeatedIsRefused) {
    ArrivalRounds arrived(kResumeBlocks);
    auto messages = arrived.encode();
    std::swap(messages[0], messages[1]);
    auto swapped = collect_rounds(messages, 0);
    ASSERT_FALSE(swapped);
    EXPECT_NE(swapped.error().message().find("once, in order"), std::string::npos) << swapped.error().message();
    messages = arrived.encode();
    messages.insert(messages.begin() + 1, messages[0]);
    EXPECT_FALSE(collect_rounds(messages, 0));
    // Another message before every page was described.
    messages = arrived.encode();
    messages.insert(messages.begin(), encode_postcopy_done());
    EXPECT_FALSE(collect_rounds(messages, 0));
}

TEST(PrecopyResume, RoundsPastTheBlockOrOfNoPagesDoNotDecode) {
    std::vector<uint32_t> one(1, 0);
    stream::MemoryStream past(encode_received_rounds(1, 70, one));
    EXPECT_FALSE(read_return(past, kResumeBlocks, 4096));
    stream::MemoryStream none(encode_received_rounds(0, 0, {}));
    EXPECT_FALSE(read_return(none, kResumeBlocks, 4096));
    std::vector<uint32_t> too_many(kMaxRoundsPages + 1, 0);
    stream::MemoryStream big(encode_received_rounds(0, 0, too_many));
    EXPECT_FALSE(read_return(big, kResumeBlocks, 4096));
    auto truncated = encode_received_rounds(1, 0, std::vector<uint32_t>(4, 1));
    truncated.pop_back();
    stream::MemoryStream short_one(truncated);
    EXPECT_FALSE(read_return(short_one, kResumeBlocks, 4096));
}

// One block of 8 pages: round 0 sent everything; round 2 took pages 1-3 and round 3 page 2.
const std::vector<BlockInfo> kEightPages = {{"pc.ram", 0, 8 * 4096}};
SentRounds eight_pages_sent() {
    SentRounds sent({8});
    std::vector<std::vector<uint64_t>> round2 = {{0b1110}}, round3 = {{0b0100}};
    sent.taken(2, round2);
    sent.taken(3, round3);
    return sent;
}

// What the destination's `arrived` tells a source that began rounds 0 to `last`, as it reads it.
ReportedRounds reported_by(const ArrivalRounds& arrived, uint32_t last) {
    stream::MemoryStream in(arrived.encode()[0]);
    auto m = read_return(in, kEightPages, 4096);
    ReportedRounds reported({8}, last);
    EXPECT_TRUE(m && reported.add(m->message, m->rounds) && reported.complete());
    return reported;
}

// The destination got the bulk round's pages 0-3 and 5, round 2's page 1 (page 3's was in
// flight) and nothing of round 3.
TEST(PrecopyResume, OnlyPagesWhoseCurrentContentsDidNotArriveGoAgain) {
    SentRounds sent = eight_pages_sent();
    EXPECT_EQ(sent.last(), 3u);
    ArrivalRounds arrived(kEightPages);
    arrived.landed(0, 0, 4, 0);
    arrived.landed(0, 5, 1, 0);
    arrived.landed(0, 1, 1, 2);
    ReportedRounds reported = reported_by(arrived, 3);
    // Pages 4, 6 and 7 never arrived: 4 and 6 hold data at the source, 7 was never populated.
    auto resend = pages_to_resend(sent, reported, [](size_t, uint64_t p) { return p != 7; });
    std::vector<bool> want = {false, false, true, true, true, false, true, false};
    for (uint64_t p = 0; p < 8; ++p) EXPECT_EQ(resend_bit(resend, 0, p), want[p]) << "page " << p;
}

// Over rdma the destination vouches per round: round 3 was cut short, and the destination has
// the bulk round and round 2's pages 1 and 2 only. The source's transport saw page 2's write of
// round 3 and page 3's of round 2 complete: neither goes again; a delivery in an earlier round
// than the destination reported changes nothing; without deliveries both go again.
TEST(PrecopyResume, WhatTheSourcesTransportDeliveredDoesNotGoAgain) {
    SentRounds sent = eight_pages_sent();
    ArrivalRounds arrived(kEightPages);
    arrived.landed(0, 0, 8, 0);
    arrived.landed(0, 1, 2, 2);
    ReportedRounds reported = reported_by(arrived, 3);
    ArrivalRounds delivered(kEightPages);
    delivered.landed(0, 2, 1, 3);
    delivered.landed(0, 3, 1, 2);
    delivered.landed(0, 1, 1, 0);  // older than what the destination reported: ignored
    EXPECT_EQ(reported.also_arrived(delivered), 2u);
    auto resend = pages_to_resend(sent, reported, [](size_t, uint64_t) { return true; });
    for (uint64_t p = 0; p < 8; ++p) EXPECT_FALSE(resend_bit(resend, 0, p)) << "page " << p;
    ReportedRounds again = reported_by(arrived, 3);
    EXPECT_EQ(again.also_arrived(ArrivalRounds(kEightPages)), 0u);
    auto without = pages_to_resend(sent, again, [](size_t, uint64_t) { return true; });
    EXPECT_TRUE(resend_bit(without, 0, 2));  // round 3's page, unvouched
    EXPECT_TRUE(resend_bit(without, 0, 3));  // round 2's page, unreported
}

}  // namespace
}  // namespace vmm::migration
