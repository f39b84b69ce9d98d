// An authenticated postcopy channel's tags (proto/postcopy_auth.h): what one end tags the other
// accepts in the same order, and a message or write that is forged, changed, replayed,
// reordered or tagged under another key is refused with what it was.
#include "proto/postcopy_auth.h"

#include <gtest/gtest.h>

#include <array>

namespace rdma_migrate {

namespace {

std::array<uint8_t, kPcAuthKeySize> key(uint8_t seed) {
    std::array<uint8_t, kPcAuthKeySize> k{};
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + 7 * i);
    return k;
}

PcKeys keys(uint8_t seed) { return *PcKeys::from(key(seed)); }

PcMessage request(uint32_t slot, uint64_t offset) {
    PcMessage m;
    m.type = PcType::request, m.slot = slot, m.block = 0, m.pages = 1, m.offset = offset;
    return m;
}

std::string sealed_refusal(const Result<PcMessage>& r) { return r ? "" : r.error().message(); }
std::string sealed_refusal(const Status& s) { return s ? "" : s.error().message(); }

// A tagged write as the source makes it: the trailer with its tag, and the pages.
struct Write {
    PcKind kind = PcKind::data;
    PcTrailer trailer;
    std::vector<uint8_t> pages;
};

Write tagged(PcTagger& tagger, PcKind kind, uint64_t offset, uint16_t pages, uint8_t fill) {
    Write w{kind, {0, pages, kPcTagged, offset, {}}, {}};
    if (kind == PcKind::data) w.pages.assign(pages * kPcPage, fill);
    auto bytes = encode_pc_trailer(w.trailer);
    w.trailer.tag = pc_write_tag(tagger, kind, bytes, w.pages);
    return w;
}

// The trailer's bytes as they would arrive: its encoding, then its tag.
Status check(PcTagger& tagger, const Write& w) {
    auto bytes = encode_pc_trailer(w.trailer);
    encode_pc_tag(bytes, w.trailer.tag);
    return check_pc_write(tagger, w.kind, w.trailer, bytes, w.pages, "pc.ram");
}

}  // namespace

TEST(PostcopyAuth, TheKeyIsTwoKeysOfSixteenBytes) {
    EXPECT_TRUE(PcKeys::from(key(1)));
    std::vector<uint8_t> short_key(16);
    EXPECT_FALSE(PcKeys::from(short_key));
}

TEST(PostcopyAuth, SealedMessagesOpenInOrderUnderTheSameKey) {
    PcKeys sender = keys(1), receiver = keys(1);
    PcMessage credit;
    credit.type = PcType::credit, credit.consumed = 8;
    PcMessage hello{PcType::hello, 0x1234, 32, 32, 0x7f0000001000, kPcSlotSize};
    for (const PcMessage& m : {hello, request(3, 0x5000), credit, PcMessage{}}) {
        auto bytes = seal_pc_message(m, sender.messages);
        ASSERT_EQ(bytes.size(), kPcSealedSize);
        auto opened = open_pc_message(bytes, receiver.messages);
        ASSERT_TRUE(opened) << opened.error().message();
        EXPECT_EQ(*opened, m);
    }
    EXPECT_EQ(receiver.messages.sequence(), 4u);
}

TEST(PostcopyAuth, AChangedMessageOrTagIsRefused) {
    for (size_t at : {size_t{3}, size_t{20}, kPcMessageSize + 2}) {
        PcKeys sender = keys(1), receiver = keys(1);
        auto bytes = seal_pc_message(request(1, 0x3000), sender.messages);
        bytes[at] ^= 0x40;
        EXPECT_NE(sealed_refusal(open_pc_message(bytes, receiver.messages)).find("failed authentication"), std::string::npos) << at;
    }
}

TEST(PostcopyAuth, AReplayedOrReorderedMessageIsRefused) {
    PcKeys sender = keys(1), receiver = keys(1);
    auto first = seal_pc_message(request(1, 0x3000), sender.messages);
    auto second = seal_pc_message(request(2, 0x4000), sender.messages);
    ASSERT_TRUE(open_pc_message(first, receiver.messages));
    EXPECT_NE(sealed_refusal(open_pc_message(first, receiver.messages)).find("message 1 failed authentication"), std::string::npos);

    PcKeys reader = keys(1);
    EXPECT_NE(sealed_refusal(open_pc_message(second, reader.messages)).find("failed authentication"), std::string::npos)
        << "the second message read first";
}

TEST(PostcopyAuth, AnotherKeyOrAnUntaggedMessageIsRefused) {
    PcKeys sender = keys(1), stranger = keys(2);
    auto bytes = seal_pc_message(request(1, 0x3000), sender.messages);
    EXPECT_NE(sealed_refusal(open_pc_message(bytes, stranger.messages)).find("failed authentication"), std::string::npos);
    PcKeys receiver = keys(1);
    auto plain = encode_pc_message(request(1, 0x3000));
    EXPECT_NE(sealed_refusal(open_pc_message(plain, receiver.messages)).find("where an authenticated one has 40"), std::string::npos);
}

TEST(PostcopyAuth, TaggedWritesPassInOrder) {
    PcKeys source = keys(5), destination = keys(5);
    Write a = tagged(source.writes, PcKind::data, 0x10000, 2, 0xab);
    Write b = tagged(source.writes, PcKind::zero, 0x40000, 16, 0);
    Write c = tagged(source.writes, PcKind::data, 0x2000, 1, 0x01);
    for (const Write* w : {&a, &b, &c}) EXPECT_EQ(sealed_refusal(check(destination.writes, *w)), "");
}

TEST(PostcopyAuth, AChangedWriteIsRefusedNamingItsRange) {
    struct Case {
        const char* what;
        void (*change)(Write&);
    };
    const Case cases[] = {
        {"a page byte", [](Write& w) { w.pages[4097] ^= 1; }},
        {"the offset", [](Write& w) { w.trailer.offset += kPcPage; }},
        {"the kind", [](Write& w) {
             w.kind = PcKind::zero;
             w.pages.clear();
         }},
        {"the tag", [](Write& w) { w.trailer.tag ^= 1u << 20; }},
        {"the sums flag", [](Write& w) {
             w.trailer.flags |= kPcSummed;
             w.trailer.sums = {1, 2};
         }},
    };
    for (const Case& c : cases) {
        PcKeys source = keys(5), destination = keys(5);
        Write w = tagged(source.writes, PcKind::data, 0x10000, 2, 0xab);
        c.change(w);
        std::string why = sealed_refusal(check(destination.writes, w));
        EXPECT_NE(why.find("failed authentication"), std::string::npos) << c.what << ": " << why;
        EXPECT_NE(why.find("RAM block 'pc.ram' offset 0x1"), std::string::npos) << c.what << ": " << why;
    }
}

TEST(PostcopyAuth, AReplayedWriteOrOneWithoutATagIsRefused) {
    PcKeys source = keys(5), destination = keys(5);
    Write w = tagged(source.writes, PcKind::data, 0x10000, 1, 0xab);
    ASSERT_EQ(sealed_refusal(check(destination.writes, w)), "");
    EXPECT_NE(sealed_refusal(check(destination.writes, w)).find("write 1 for RAM block"), std::string::npos) << "replayed";

    PcKeys other = keys(5);
    Write untagged = w;
    untagged.trailer.flags = 0;
    EXPECT_NE(sealed_refusal(check(other.writes, untagged)).find("carries no tag"), std::string::npos);
}

TEST(PostcopyAuth, TheTrailerCarriesItsTagAfterTheSums) {
    PcTrailer t{1, 2, kPcSummed | kPcTagged, 0x8000, {11, 22}, 0x0102030405060708};
    auto bytes = encode_pc_trailer(t);
    ASSERT_EQ(bytes.size(), kPcTrailerSize + 16);
    encode_pc_tag(bytes, t.tag);
    auto back = decode_pc_trailer(bytes);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, t);
    EXPECT_FALSE(decode_pc_trailer({bytes.data(), bytes.size() - 1})) << "the tag overruns the slot";
}

}  // namespace rdma_migrate

namespace rdma_migrate {
namespace {

// kCapPostcopyRead on an authenticated channel: the tag of each page the source exposes, read
// beside it. The page as tagged passes; a changed page, a changed tag, a tag moved to another
// page or block, or one made under another key names the page and places nothing.
TEST(PostcopyAuth, PagesReadByReadPassOnlyWithTheirOwnTags) {
    std::array<uint8_t, 16> k{}, other{};
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(3 * i + 1), other[i] = static_cast<uint8_t>(5 * i);
    PcPageTags source(k), destination(k), foreign(other);
    std::vector<uint8_t> pages(3 * kPcPage);
    for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<uint8_t>(i * 31 + i / kPcPage);
    auto table = [](PcPageTags& t, uint32_t block, uint64_t offset, const std::vector<uint8_t>& p) {
        std::vector<uint8_t> out;
        for (size_t i = 0; i < p.size() / kPcPage; ++i) {
            uint64_t v = t.tag(block, offset + i * kPcPage, {p.data() + i * kPcPage, kPcPage});
            for (int j = 7; j >= 0; --j) out.push_back(static_cast<uint8_t>(v >> (8 * j)));
        }
        return out;
    };
    auto tags = table(source, 0, 0x5000, pages);
    auto refusal = [&](const std::vector<uint8_t>& p, const std::vector<uint8_t>& t, uint32_t block = 0,
                       uint64_t offset = 0x5000) {
        auto s = destination.check(block, offset, p, t, "pc.ram");
        return s ? std::string() : s.error().message();
    };
    EXPECT_EQ(refusal(pages, tags), "");
    auto changed = pages;
    changed[kPcPage + 17] ^= 1;
    EXPECT_EQ(refusal(changed, tags),
              "RDMA postcopy: the page read by RDMA READ from RAM block 'pc.ram' offset 0x6000 failed authentication (MAC "
              "mismatch): not what the source exposed, or its tag was not; nothing of the 3 page(s) read was placed");
    auto bad_tag = tags;
    bad_tag[2 * 8 + 3] ^= 0x40;
    EXPECT_NE(refusal(pages, bad_tag).find("offset 0x7000 failed authentication"), std::string::npos);
    EXPECT_NE(refusal(pages, tags, 0, 0x6000).find("offset 0x6000 failed"), std::string::npos) << "moved a page on";
    EXPECT_NE(refusal(pages, tags, 1).find("failed authentication"), std::string::npos) << "another block";
    EXPECT_NE(refusal(pages, table(foreign, 0, 0x5000, pages)).find("failed authentication"), std::string::npos);
    EXPECT_NE(refusal(pages, std::vector<uint8_t>(tags.begin(), tags.end() - 8)).find("internal"), std::string::npos);
}

// KEYS on an authenticated channel carry the writes' tag after their regions, in the writes'
// order: a changed region or a replayed KEYS is refused.
TEST(PostcopyAuth, KeysAreTaggedInTheWritesOrder) {
    PcKeys src = keys(9), dst = keys(9);
    std::vector<PcRegion> one{{0, 0x77, 0, 1ull << 20, 0x7f0000000000, 0x99, 0x7d0000000000}};
    auto first = encode_pc_regions(one, true);
    seal_pc_keys(first, src.writes);
    EXPECT_TRUE(open_pc_keys(first, kPcTaggedRegionSize, dst.writes));
    auto second = encode_pc_regions(one, true);
    second[4] ^= 1;  // another rkey
    seal_pc_keys(second, src.writes);
    auto changed = second;
    changed[5] ^= 1;
    auto refused = open_pc_keys(changed, kPcTaggedRegionSize, dst.writes);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("write 1 (KEYS) failed authentication"), std::string::npos)
        << refused.error().message();
    EXPECT_FALSE(open_pc_keys(first, kPcTaggedRegionSize, dst.writes)) << "replayed";
}

}  // namespace
}  // namespace rdma_migrate
