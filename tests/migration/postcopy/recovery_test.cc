// Postcopy recovery's exchange: the destination describes every page it holds, once and in
// order; the source refuses a description that skips, repeats or runs past a block, and what it
// collects is exactly what the destination said.
#include "vmm/migration/postcopy/recovery.h"

#include <gtest/gtest.h>

#include "vmm/stream/byte_stream.h"
#include "vmm/migration/transport/stream_io.h"

namespace vmm::migration {
namespace {

// 'big' spans more pages than one RECEIVED_BITMAP may carry, so it takes two messages.
const std::vector<BlockInfo> kRecoveryBlocks = {{"pc.ram", 0, (uint64_t{kMaxBitmapPages} + 100) * 4096},
                                        {"high", uint64_t{8} << 30, 70 * 4096}};

std::vector<std::vector<uint64_t>> empty_bits() {
    std::vector<std::vector<uint64_t>> bits;
    for (const auto& b : kRecoveryBlocks) bits.emplace_back((b.size / 4096 + 63) / 64, 0);
    return bits;
}

// Reads the messages as the source does, off a stream.
Result<ReceivedPages> collect(const std::vector<std::vector<uint8_t>>& messages) {
    std::vector<uint8_t> bytes;
    for (const auto& m : messages) bytes.insert(bytes.end(), m.begin(), m.end());
    stream::MemoryStream in(bytes);
    ReceivedPages got(kRecoveryBlocks);
    while (!got.complete()) {
        auto m = read_return(in, kRecoveryBlocks, 4096);
        if (!m) return m.error();
        if (auto s = got.add(m->message, m->words); !s) return s.error();
    }
    if (in.remaining() != 0) return Error("bytes left over");
    return got;
}

TEST(PostcopyRecovery, TheSourceLearnsExactlyWhichPagesTheDestinationHolds) {
    auto missing = empty_bits();
    missing[0][0] = 0b1011;                          // pages 0, 1, 3 of pc.ram still missing
    missing[0][kMaxBitmapPages / 64] = 1ull << 5;    // and one in the second message's range
    missing[1][1] = 1ull << 5;                       // page 69 of high (its last)
    auto messages = encode_received_pages(kRecoveryBlocks, missing);
    EXPECT_EQ(messages.size(), 3u) << "pc.ram in two messages, high in one";
    auto got = collect(messages);
    ASSERT_TRUE(got) << got.error().message();
    const auto& held = got->bits();
    EXPECT_EQ(held[0][0], ~uint64_t{0b1011});
    EXPECT_EQ(held[0][kMaxBitmapPages / 64], ~(1ull << 5));
    EXPECT_EQ(held[0][kMaxBitmapPages / 64 + 1], (1ull << 36) - 1) << "no bit past the block's 100 last pages";
    EXPECT_EQ(held[1][0], ~uint64_t{0});
    EXPECT_EQ(held[1][1], (1ull << 5) - 1) << "high's pages 64..68 held, 69 missing, nothing past 70";
}

TEST(PostcopyRecovery, ADescriptionOutOfOrderRepeatedOrOfTheWrongKindIsRefused) {
    auto all = encode_received_pages(kRecoveryBlocks, empty_bits());
    ASSERT_EQ(all.size(), 3u);
    auto skipped = collect({all[1], all[0], all[2]});
    ASSERT_FALSE(skipped);
    EXPECT_NE(skipped.error().message().find("where page 0 was due"), std::string::npos) << skipped.error().message();
    auto repeated = collect({all[0], all[0]});
    ASSERT_FALSE(repeated);
    EXPECT_NE(repeated.error().message().find("was due"), std::string::npos) << repeated.error().message();
    auto request_first = collect({encode_page_request(0, 0, 4096)});
    ASSERT_FALSE(request_first);
    EXPECT_NE(request_first.error().message().find("before describing every page"), std::string::npos);
    ReceivedPages p(kRecoveryBlocks);
    ReturnMessage m;
    m.type = ReturnType::received_bitmap;
    m.page_count = 64;
    EXPECT_FALSE(p.add(m, {})) << "words that do not match the count";
    EXPECT_FALSE(p.complete());
}

}  // namespace
}  // namespace vmm::migration
