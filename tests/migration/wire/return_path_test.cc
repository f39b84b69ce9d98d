#include "vmm/migration/wire/return_path.h"

#include <gtest/gtest.h>

namespace vmm::migration {
namespace {

const std::vector<BlockInfo> kBlocks = {{"pc.ram", 0, 1 << 20}, {"high", 4 << 20, 256 << 10}};

Result<ReturnMessage> decode_return(const std::vector<uint8_t>& bytes) {
    auto n = return_body_size(bytes.at(0));
    if (!n) return n.error();
    return decode_return(bytes[0], std::span(bytes).subspan(1, std::min(*n, bytes.size() - 1)), kBlocks, 4096);
}

TEST(ReturnPath, APageRequestRoundTrips) {
    auto m = decode_return(encode_page_request(1, 8192, 8192));
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->type, ReturnType::page_request);
    EXPECT_EQ(m->block, 1u);
    EXPECT_EQ(m->offset, 8192u);
    EXPECT_EQ(m->length, 8192u);
}

TEST(ReturnPath, ARequestOutsideGuestRamIsRefusedByName) {
    const std::pair<std::vector<uint8_t>, const char*> cases[] = {
        {encode_page_request(2, 0, 4096), "RAM block index 2"},
        {encode_page_request(1, 256 << 10, 4096), "outside RAM block 'high'"},
        {encode_page_request(0, UINT64_MAX - 4095, 8192), "outside RAM block 'pc.ram'"},  // offset + length overflows
        {encode_page_request(0, 100, 4096), "not whole pages"},
        {encode_page_request(0, 0, 0), "not whole pages"},
        {encode_page_request(0, 0, 4u << 20), "exceeds"},
    };
    for (const auto& [bytes, phrase] : cases) {
        auto m = decode_return(bytes);
        ASSERT_FALSE(m);
        EXPECT_NE(m.error().message().find(phrase), std::string::npos) << m.error().message();
    }
}

TEST(ReturnPath, AReceivedBitmapRoundTripsWithItsWords) {
    std::vector<uint64_t> words = {~0ULL, 0x5ULL};
    auto bytes = encode_received_bitmap(0, 64, 67, words);
    auto m = decode_return(bytes);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->first_page, 64u);
    EXPECT_EQ(m->page_count, 67u);
    ASSERT_EQ(bitmap_bytes(*m), 16u);
    auto got = decode_bitmap_words(*m, std::span(bytes).subspan(17));
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(*got, words);
}

TEST(ReturnPath, ABitmapThatSaysMoreThanItCountsIsRefused) {
    const std::pair<std::vector<uint8_t>, const char*> cases[] = {
        {encode_received_bitmap(0, 3, 64, std::vector<uint64_t>{0}), "not 64-aligned"},
        {encode_received_bitmap(0, 0, 0, std::vector<uint64_t>{}), "a bitmap of 0 pages"},
        {encode_received_bitmap(0, 0, kMaxBitmapPages + 1, std::vector<uint64_t>{}), "a bitmap of"},
        {encode_received_bitmap(1, 0, 65, std::vector<uint64_t>{0, 0}), "outside RAM block 'high'"},
        {encode_received_bitmap(0, UINT64_MAX / 64 * 64, 64, std::vector<uint64_t>{0}), "beyond any RAM block"},
    };
    for (const auto& [bytes, phrase] : cases) {
        auto m = decode_return(bytes);
        ASSERT_FALSE(m);
        EXPECT_NE(m.error().message().find(phrase), std::string::npos) << m.error().message();
    }
    auto bytes = encode_received_bitmap(0, 0, 3, std::vector<uint64_t>{0x8});  // bit 3 of a 3-page bitmap
    auto m = decode_return(bytes);
    ASSERT_TRUE(m);
    auto words = decode_bitmap_words(*m, std::span(bytes).subspan(17));
    ASSERT_FALSE(words);
    EXPECT_NE(words.error().message().find("past its 3 pages"), std::string::npos) << words.error().message();
    EXPECT_FALSE(decode_bitmap_words(*m, std::span(bytes).subspan(18)));  // truncated
}

TEST(ReturnPath, UnknownAndTruncatedMessagesAreRefused) {
    EXPECT_FALSE(return_body_size(0x80));
    auto done = decode_return(encode_postcopy_done());
    ASSERT_TRUE(done);
    EXPECT_EQ(done->type, ReturnType::postcopy_done);
    auto request = encode_page_request(0, 0, 4096);
    EXPECT_FALSE(decode_return(request[0], std::span(request).subspan(1, 10), kBlocks, 4096));
}

}  // namespace
}  // namespace vmm::migration
