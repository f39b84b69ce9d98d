// A pull's wire (ours, kCapPull): OFFER, PULLED and DONE round-trip at their fixed size, and
// what a hostile or confused peer sends is refused with a reason: another size, type or
// version, an offer of nothing, of too much, or one that wraps the address space, padding that
// is not zero.
#include "proto/pull_wire.h"

#include <gtest/gtest.h>

#include "proto/wire.h"

namespace rdma_migrate {

namespace {
std::string refusal(std::span<const uint8_t> bytes) {
    auto r = decode_pull_message(bytes);
    return r ? "" : r.error().message();
}
}  // namespace

TEST(PullWire, MessagesRoundTripAtTheirFixedSize) {
    PullMessage offer;
    offer.length = 3ull << 30, offer.address = 0x7f0012340000, offer.rkey = 0xabcd, offer.reads = 16;
    PullMessage pulled;
    pulled.type = PullType::pulled, pulled.bytes = 123456789;
    PullMessage done;
    done.type = PullType::done, done.bytes = 1ull << 40;
    for (const PullMessage& m : {offer, pulled, done}) {
        auto bytes = encode_pull_message(m);
        ASSERT_EQ(bytes.size(), kPullMessageSize);
        auto back = decode_pull_message(bytes);
        ASSERT_TRUE(back) << back.error().message();
        EXPECT_EQ(back->type, m.type);
        EXPECT_EQ(back->bytes, m.type == PullType::offer ? 0u : m.bytes);
        if (m.type == PullType::offer) {
            EXPECT_EQ(back->length, m.length);
            EXPECT_EQ(back->address, m.address);
            EXPECT_EQ(back->rkey, m.rkey);
            EXPECT_EQ(back->reads, m.reads);
        }
    }
}

TEST(PullWire, WhatAPeerCannotMeanIsRefused) {
    PullMessage offer;
    offer.length = 1 << 20, offer.address = 0x10000, offer.rkey = 1, offer.reads = 1;
    auto good = encode_pull_message(offer);
    EXPECT_NE(refusal(std::span(good).first(kPullMessageSize - 1)).find("a message of 39 bytes"), std::string::npos);
    auto longer = good;
    longer.push_back(0);
    EXPECT_NE(refusal(longer).find("a message of 41 bytes"), std::string::npos);
    auto type = good;
    type[3] = 9;
    EXPECT_NE(refusal(type).find("unknown type 9"), std::string::npos);
    auto version = good;
    version[7] = 2;
    EXPECT_NE(refusal(version).find("the server speaks version 2"), std::string::npos);
    auto none = offer, huge = offer, wraps = offer, reads = offer;
    none.length = 0;
    huge.length = kPullMaxLength + 1;
    wraps.address = UINT64_MAX - 4095;
    reads.reads = 256;
    EXPECT_NE(refusal(encode_pull_message(none)).find("an offer of 0 bytes"), std::string::npos);
    EXPECT_NE(refusal(encode_pull_message(huge)).find("an offer of"), std::string::npos);
    EXPECT_NE(refusal(encode_pull_message(wraps)).find("an offer of"), std::string::npos);
    EXPECT_NE(refusal(encode_pull_message(reads)).find("256 READs at once"), std::string::npos);
    auto padded = good;
    padded.back() = 1;
    EXPECT_NE(refusal(padded).find("padding is not zero"), std::string::npos);
    PullMessage pulled;
    pulled.type = PullType::pulled;
    auto p = encode_pull_message(pulled);
    p[5] = 1;  // the word after the type
    EXPECT_NE(refusal(p).find("padding is not zero"), std::string::npos);
}

// Clones and migrations never meet: a pull's request says kCapPull, which needs the extension
// block (so a base-protocol peer sees an extension it does not know and says so).
TEST(PullWire, APullRequestCarriesItsCapability) {
    auto bytes = encode_private_data({kProtocolVersion, kCapPull});
    ASSERT_EQ(bytes.size(), kPrivateDataSize);
    auto back = decode_private_data(bytes);
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_NE(back->flags & kCapPull, 0u);
}

}  // namespace rdma_migrate
