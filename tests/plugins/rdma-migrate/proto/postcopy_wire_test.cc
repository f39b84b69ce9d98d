// The postcopy channel's wire (ours, kCapPostcopy): messages, immediates and slot trailers
// round-trip byte for byte, and what a hostile or confused peer sends is refused with a reason
// before any of it can name memory outside guest RAM or the landing slots.
#include "proto/postcopy_wire.h"

#include <gtest/gtest.h>

#include "proto/chunks.h"

namespace rdma_migrate {

namespace {
std::vector<LocalBlock> two_blocks() {
    std::vector<LocalBlock> b{{"pc.ram", nullptr, 64ull << 20, 0}, {"high", nullptr, 3ull << 20, 1ull << 32}};
    assign_offsets(b);
    return b;
}

std::string refusal(const Result<PcMessage>& r) { return r ? "" : r.error().message(); }
}  // namespace

TEST(PostcopyWire, MessagesRoundTripAtTheirFixedSize) {
    PcMessage hello{PcType::hello, 0x1234, 32, 16, 0x7f0000001000, kPcSlotSize};
    PcMessage request;
    request.type = PcType::request, request.slot = 5, request.block = 1, request.pages = 1, request.offset = 0x3000;
    PcMessage credit;
    credit.type = PcType::credit, credit.consumed = 1ull << 40;
    PcMessage done;
    PcMessage have;
    have.type = PcType::have, have.block = 1, have.pages = 256, have.offset = 0x100000;
    for (const PcMessage& m : {hello, request, credit, done, have}) {
        auto bytes = encode_pc_message(m);
        ASSERT_EQ(bytes.size(), kPcMessageSize);
        auto back = decode_pc_message(bytes);
        ASSERT_TRUE(back) << back.error().message();
        EXPECT_EQ(*back, m);
    }
    // Network order: the type is the first big-endian word.
    auto bytes = encode_pc_message(request);
    EXPECT_EQ((std::vector<uint8_t>(bytes.begin(), bytes.begin() + 8)), (std::vector<uint8_t>{0, 0, 0, 2, 0, 0, 0, 5}));
}

TEST(PostcopyWire, BadMessagesAreRefusedWithAReason) {
    auto hello = encode_pc_message({PcType::hello, 1, 32, 32, 0x7f0000000000, kPcSlotSize});
    EXPECT_NE(refusal(decode_pc_message({hello.data(), hello.size() - 1})).find("32"), std::string::npos);
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message({PcType::hello, 1, 0, 32, 0x7f0000000000, kPcSlotSize}))).find("slots"),
              std::string::npos);
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message({PcType::hello, 1, 32, 999, 0x7f0000000000, kPcSlotSize}))).find("slots"),
              std::string::npos);
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message({PcType::hello, 1, 32, 32, 0x7f0000000000, 4096}))).find("bytes"),
              std::string::npos);
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message({PcType::hello, 1, 32, 32, 0x7f0000000123, kPcSlotSize}))).find("aligned"),
              std::string::npos);
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message({PcType::hello, 1, 256, 256, ~0ull - 4095, kPcSlotSize}))).find("wraps"),
              std::string::npos);
    PcMessage request;
    request.type = PcType::request, request.pages = 17;
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message(request))).find("pages"), std::string::npos);
    request.pages = 1, request.offset = 100;
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message(request))).find("offset"), std::string::npos);
    PcMessage have;
    have.type = PcType::have, have.pages = 0;
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message(have))).find("HAVE: 0 pages"), std::string::npos);
    have.pages = kPcMaxHave + 1;
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message(have))).find("HAVE"), std::string::npos);
    have.pages = 1, have.offset = 100;
    EXPECT_NE(refusal(decode_pc_message(encode_pc_message(have))).find("whole pages"), std::string::npos);
    auto unknown = encode_pc_message({});
    unknown[3] = 9;
    EXPECT_NE(refusal(decode_pc_message(unknown)).find("type 9"), std::string::npos);
}

TEST(PostcopyWire, ImmediatesNameAKnownKindAndASlotThatExists) {
    for (PcImmediate imm : {PcImmediate{PcKind::data, 63, 16}, PcImmediate{PcKind::zero, 0, 1}, PcImmediate{PcKind::end, 0, 0}}) {
        auto back = decode_pc_immediate(encode_pc_immediate(imm), 64);
        ASSERT_TRUE(back) << back.error().message();
        EXPECT_EQ(*back, imm);
    }
    EXPECT_FALSE(decode_pc_immediate(encode_pc_immediate({PcKind::data, 64, 1}), 64));  // slot 64 of 64
    EXPECT_FALSE(decode_pc_immediate(encode_pc_immediate({PcKind::data, 1, 0}), 64));
    EXPECT_FALSE(decode_pc_immediate(encode_pc_immediate({PcKind::data, 1, 17}), 64));
    EXPECT_FALSE(decode_pc_immediate(0x09000101u, 64));                      // kind 9
    EXPECT_FALSE(decode_pc_immediate(encode_pc_immediate({PcKind::end, 3, 0}), 64));  // END carries nothing
}

TEST(PostcopyWire, TrailersCarryTheirSumsAndNeverOverrunTheSlot) {
    PcTrailer t{1, 3, kPcSummed, 0x10000, {7, 8, 9}};
    auto bytes = encode_pc_trailer(t);
    ASSERT_EQ(bytes.size(), kPcTrailerSize + 3 * 8);
    auto back = decode_pc_trailer(bytes);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, t);
    EXPECT_FALSE(decode_pc_trailer({bytes.data(), bytes.size() - 1}));  // the sums overrun the slot
    EXPECT_FALSE(decode_pc_trailer({bytes.data(), kPcTrailerSize - 1}));
    EXPECT_FALSE(decode_pc_trailer(encode_pc_trailer({0, 1, 4, 0, {}})));     // unknown flag
    EXPECT_FALSE(decode_pc_trailer(encode_pc_trailer({0, 0, 0, 0, {}})));     // no page
    EXPECT_FALSE(decode_pc_trailer(encode_pc_trailer({0, 1, 0, 0x800, {}})));  // not page-aligned
    EXPECT_EQ(pc_trailer_offset({PcKind::data, 0, 3}), 3 * kPcPage);
    EXPECT_EQ(pc_trailer_offset({PcKind::zero, 0, 3}), 0u);
}

// Every page a peer names is checked against this side's blocks before anything touches it.
TEST(PostcopyWire, PagesOutsideGuestRamAreRefused) {
    auto blocks = two_blocks();
    EXPECT_TRUE(check_pc_range(blocks, 0, 0, 16));
    EXPECT_TRUE(check_pc_range(blocks, 1, (3ull << 20) - kPcPage, 1));
    EXPECT_FALSE(check_pc_range(blocks, 1, (3ull << 20) - kPcPage, 2));  // one page past the end
    EXPECT_FALSE(check_pc_range(blocks, 1, 3ull << 20, 1));
    EXPECT_FALSE(check_pc_range(blocks, 2, 0, 1));                       // no such block
    EXPECT_FALSE(check_pc_range(blocks, 0, ~0ull & ~(kPcPage - 1), 16)); // would wrap
    EXPECT_FALSE(check_pc_range(blocks, 0, 100, 1));
    auto e = check_pc_range(blocks, 1, 3ull << 20, 1);
    EXPECT_NE(e.error().message().find("'high'"), std::string::npos) << e.error().message();
}

// PULL (kCapPostcopyReadPush): the pace and the runs the destination reads itself round-trip;
// a run that is not whole pages, is empty or too long, and a count the bytes do not hold, are
// refused.
TEST(PostcopyWire, PullNamesTheRunsAndThePace) {
    PcPulls p{uint64_t{2} << 20, {{0, 16, 0x10000}, {1, kPcMaxPullPages, 0}}};
    auto bytes = encode_pc_pulls(p);
    ASSERT_EQ(bytes.size(), pc_pulls_size(2));
    auto back = decode_pc_pulls(bytes, 2);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(back->rate, p.rate);
    EXPECT_EQ(back->runs, p.runs);
    EXPECT_FALSE(decode_pc_pulls(bytes, 3)) << "more runs than bytes";
    EXPECT_FALSE(decode_pc_pulls(bytes, 0));
    EXPECT_FALSE(decode_pc_pulls(std::span<const uint8_t>(bytes).first(4), 1)) << "no room for the pace";
    auto refused = [](PcPullRun r) { return !decode_pc_pulls(encode_pc_pulls({0, {r}}), 1); };
    EXPECT_TRUE(refused({0, 0, 0}));                    // no page
    EXPECT_TRUE(refused({0, kPcMaxPullPages + 1, 0}));  // too long
    EXPECT_TRUE(refused({0, 1, 0x800}));                // not a page's offset
    EXPECT_FALSE(refused({0, 1, 0x1000}));
    auto imm = decode_pc_immediate(encode_pc_immediate({PcKind::pull, 40, 2}), 64);
    ASSERT_TRUE(imm);
    EXPECT_EQ(imm->kind, PcKind::pull);
    EXPECT_FALSE(decode_pc_immediate(encode_pc_immediate({PcKind::pull, 40, 0}), 64)) << "a PULL with no run";
}

// KEYS (kCapPostcopyRead): regions of the source's RAM round-trip, and a region that is not
// whole aligned pages, has no address, wraps, or lies outside a block is refused.
TEST(PostcopyWire, KeysNameWholePagesInsideABlock) {
    std::vector<PcRegion> regions{{0, 0x77, 0, 64ull << 20, 0x7f0000000000}, {1, 0x78, 1ull << 20, 2ull << 20, 0x7e0000100000}};
    auto bytes = encode_pc_regions(regions);
    ASSERT_EQ(bytes.size(), 2 * kPcRegionSize);
    auto back = decode_pc_regions(bytes, 2);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, regions);
    auto imm = decode_pc_immediate(encode_pc_immediate({PcKind::keys, 40, 2}), 64);
    ASSERT_TRUE(imm);
    EXPECT_EQ(imm->kind, PcKind::keys);
    EXPECT_FALSE(decode_pc_immediate(encode_pc_immediate({PcKind::keys, 40, 0}), 64));  // no region
    EXPECT_FALSE(decode_pc_regions(bytes, 3)) << "more regions than bytes";
    EXPECT_FALSE(decode_pc_regions(bytes, 0));
    auto refused = [](PcRegion r) { return !decode_pc_regions(encode_pc_regions(std::vector<PcRegion>{r}), 1); };
    EXPECT_TRUE(refused({0, 1, 0x800, 4096, 0x7f0000000000}));          // offset not a page
    EXPECT_TRUE(refused({0, 1, 0, 100, 0x7f0000000000}));               // length not pages
    EXPECT_TRUE(refused({0, 1, 0, 0, 0x7f0000000000}));                 // empty
    EXPECT_TRUE(refused({0, 1, 0, 4096, 0}));                           // no address
    EXPECT_TRUE(refused({0, 1, 0, 8192, 0xfffffffffffff000}));          // wraps
    // Tagged (an authenticated channel): each region names its page tag table, which must be
    // an aligned table of one tag a page, with an address, not wrapping.
    std::vector<PcRegion> tagged{{0, 0x77, 0, 64ull << 20, 0x7f0000000000, 0x99, 0x7d0000000000}};
    auto tb = encode_pc_regions(tagged, true);
    ASSERT_EQ(tb.size(), kPcTaggedRegionSize);
    auto tback = decode_pc_regions(tb, 1, true);
    ASSERT_TRUE(tback) << tback.error().message();
    EXPECT_EQ(*tback, tagged);
    EXPECT_FALSE(decode_pc_regions(bytes, 2, true)) << "untagged regions are too short to be tagged ones";
    auto tag_refused = [](PcRegion r) { return !decode_pc_regions(encode_pc_regions(std::vector<PcRegion>{r}, true), 1, true); };
    EXPECT_TRUE(tag_refused({0, 1, 0, 4096, 0x7f0000000000, 2, 0}));                   // no table
    EXPECT_TRUE(tag_refused({0, 1, 0, 4096, 0x7f0000000000, 2, 0x7d0000000003}));      // not aligned
    EXPECT_TRUE(tag_refused({0, 1, 0, 8192, 0x7f0000000000, 2, 0xfffffffffffffff8}));  // wraps
    EXPECT_FALSE(tag_refused({0, 1, 0, 8192, 0x7f0000000000, 2, 0x7d0000000008}));
    auto blocks = two_blocks();
    EXPECT_FALSE(check_pc_range(blocks, 1, 2ull << 20, (2ull << 20) / kPcPage)) << "past block 'high'";
    EXPECT_FALSE(check_pc_range(blocks, 2, 0, 1)) << "no block 2";
    EXPECT_TRUE(check_pc_range(blocks, 0, 0, (64ull << 20) / kPcPage));
}

}  // namespace rdma_migrate
