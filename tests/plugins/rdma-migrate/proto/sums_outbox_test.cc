// SumsOutbox: a range's sums go only once its pages are at the destination (every write of a data
// range landed, a zero range's COMPRESS sent), mid-round only once worth a message, every message
// within the wire's limits, and a round that ends with sums still waiting is an error.
#include <gtest/gtest.h>

#include <numeric>

#include "proto/sums_outbox.h"

namespace rdma_migrate {
namespace {

constexpr uint64_t kPage = 4096;

SumsEntry entry(uint32_t block, uint64_t offset, size_t pages) {
    SumsEntry e{block, offset, std::vector<uint64_t>(pages)};
    std::iota(e.sums.begin(), e.sums.end(), offset / kPage);  // sum = page number: shows where it went
    return e;
}

size_t pages_in(const std::vector<std::vector<SumsEntry>>& messages) {
    size_t n = 0;
    for (const auto& m : messages)
        for (const auto& e : m) n += e.sums.size();
    return n;
}

// Gives a range's sums and hands the range over, as ram_send does.
uint64_t send_range(SumsOutbox& o, uint32_t block, uint64_t offset, size_t pages, size_t pieces) {
    EXPECT_TRUE(o.give(entry(block, offset, pages)));
    auto taken = o.take(block, offset, pages * kPage);
    EXPECT_TRUE(taken && *taken);
    return o.await_writes(std::move(**taken), pieces);
}

TEST(SumsOutbox, ADataRangeIsReadyOnlyOnceEveryWriteOfItLanded) {
    SumsOutbox o;
    uint64_t n = send_range(o, 0, 0, 16, 3);
    EXPECT_NE(n, 0u);
    o.write_landed(n);
    o.write_landed(n);
    EXPECT_TRUE(o.batches(true).empty()) << "one of its three writes has not landed";
    EXPECT_FALSE(o.round_ended());
    o.write_landed(n);
    auto messages = o.batches(true);
    ASSERT_EQ(messages.size(), 1u);
    ASSERT_EQ(messages[0].size(), 1u);
    EXPECT_EQ(messages[0][0].sums.size(), 16u);
    EXPECT_TRUE(o.round_ended());
    EXPECT_TRUE(o.batches(true).empty()) << "sent once";
}

TEST(SumsOutbox, AZeroRangeIsReadyOnceItsCompressWent) {
    SumsOutbox o;
    ASSERT_TRUE(o.give(entry(1, 8 * kPage, 4)));
    auto taken = o.take(1, 8 * kPage, 4 * kPage);
    ASSERT_TRUE(taken && *taken);
    o.await_compress(std::move(**taken));
    EXPECT_TRUE(o.batches(true).empty());
    EXPECT_FALSE(o.round_ended()) << "its COMPRESS has not gone";
    o.compress_sent();
    auto messages = o.batches(true);
    ASSERT_EQ(pages_in(messages), 4u);
    EXPECT_EQ(messages[0][0].block, 1u);
    EXPECT_EQ(messages[0][0].offset, 8 * kPage);
}

TEST(SumsOutbox, MidRoundWaitsUntilWorthAMessage) {
    SumsOutbox o;
    uint64_t a = send_range(o, 0, 0, SumsOutbox::kFlushPages - 1, 1);
    o.write_landed(a);
    EXPECT_FALSE(o.due());
    EXPECT_TRUE(o.batches(false).empty());
    uint64_t b = send_range(o, 0, (SumsOutbox::kFlushPages - 1) * kPage, 1, 1);
    o.write_landed(b);
    EXPECT_TRUE(o.due());
    EXPECT_EQ(pages_in(o.batches(false)), SumsOutbox::kFlushPages);
    EXPECT_FALSE(o.due());
}

TEST(SumsOutbox, ALongRangeIsSplitAcrossMessagesAtPageOffsets) {
    SumsOutbox o;
    size_t pages = 2 * kMaxSumsPerMessage + 5;
    o.write_landed(send_range(o, 2, 0x100000, pages, 1));
    auto messages = o.batches(true);
    ASSERT_EQ(messages.size(), 3u);
    uint64_t next_page = 0x100000 / kPage;
    for (const auto& m : messages) {
        size_t in_message = 0;
        for (const auto& e : m) {
            EXPECT_EQ(e.offset, next_page * kPage);
            EXPECT_EQ(e.sums.front(), next_page) << "each piece keeps its own pages' sums";
            next_page += e.sums.size();
            in_message += e.sums.size();
        }
        EXPECT_LE(in_message, kMaxSumsPerMessage);
    }
    EXPECT_EQ(next_page, 0x100000 / kPage + pages);
}

TEST(SumsOutbox, NoMessageHoldsMoreEntriesThanTheSpecRepeats) {
    SumsOutbox o;
    for (uint64_t i = 0; i < kMaxRepeat + 10; ++i) o.write_landed(send_range(o, 0, i * 2 * kPage, 1, 1));
    auto messages = o.batches(true);
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].size(), kMaxRepeat);
    EXPECT_EQ(messages[1].size(), 10u);
}

TEST(SumsOutbox, SumsForAnotherRangeOrGivenTwiceAreInternalErrors) {
    SumsOutbox o;
    ASSERT_TRUE(o.give(entry(0, 0, 4)));
    EXPECT_FALSE(o.give(entry(0, 4 * kPage, 4))) << "given twice";
    auto wrong = o.take(0, 0, 8 * kPage);
    ASSERT_FALSE(wrong);
    EXPECT_NE(wrong.error().message().find("came before pages"), std::string::npos) << wrong.error().message();
    auto none = o.take(0, 0, 4 * kPage);
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none) << "nothing given: nothing taken";
}

TEST(SumsOutbox, ANewRoundDropsSumsNeverUsedAndUnknownNumbersChangeNothing) {
    SumsOutbox o;
    ASSERT_TRUE(o.give(entry(0, 0, 4)));
    EXPECT_FALSE(o.round_ended());
    o.new_round();
    EXPECT_TRUE(o.round_ended());
    o.write_landed(12345);
    EXPECT_TRUE(o.batches(true).empty());
}

}  // namespace
}  // namespace rdma_migrate
