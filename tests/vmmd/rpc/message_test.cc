#include "vmmd/rpc/message.h"

#include <gtest/gtest.h>

#include <array>

namespace vmmd::rpc {
namespace {

std::array<uint8_t, 4> word(uint32_t v) {
    return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
            static_cast<uint8_t>(v)};
}

TEST(RpcMessage, RoundTripsAHeaderAndPayload) {
    Header h{kRemoteProgram, kRemoteVersion, 66, Type::call, 7, ReplyStatus::ok};
    std::vector<uint8_t> payload = {0, 0, 0, 1};
    auto bytes = encode_message(h, payload);
    ASSERT_EQ(bytes.size(), 4 + 24 + 4u);
    auto len = decode_length(std::span<const uint8_t, 4>(bytes.data(), 4));
    ASSERT_TRUE(len);
    EXPECT_EQ(*len, 28u);
    auto m = decode_message(std::span(bytes).subspan(4));
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->header.program, kRemoteProgram);
    EXPECT_EQ(m->header.procedure, 66);
    EXPECT_EQ(m->header.serial, 7u);
    EXPECT_EQ(m->payload, payload);
}

TEST(RpcMessage, LengthsOutsideLibvirtsBoundsAreRefused) {
    EXPECT_FALSE(decode_length(word(0)));
    EXPECT_FALSE(decode_length(word(27))) << "shorter than a header";
    EXPECT_TRUE(decode_length(word(28)));
    EXPECT_TRUE(decode_length(word(4 + kMaxMessage)));
    EXPECT_FALSE(decode_length(word(4 + kMaxMessage + 1))) << "past VIR_NET_MESSAGE_MAX";
    EXPECT_FALSE(decode_length(word(0xffffffff)));
}

TEST(RpcMessage, BadTypesAndStatusesAreRefused) {
    Header h;
    auto bytes = encode_message(h, {});
    bytes[4 + 15] = 9;  // type
    EXPECT_FALSE(decode_message(std::span(bytes).subspan(4)));
    bytes[4 + 15] = 0;
    bytes[4 + 23] = 3;  // status
    EXPECT_FALSE(decode_message(std::span(bytes).subspan(4)));
    EXPECT_FALSE(decode_message(std::span(bytes).subspan(4, 23)));
}

TEST(RpcMessage, ErrorsRoundTrip) {
    RemoteError e;
    e.code = 3;
    e.domain = 0;
    e.message = "this function is not supported";
    e.str1 = "x";
    auto back = decode_error(encode_error(e));
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(back->code, 3);
    EXPECT_EQ(back->message, e.message);
    EXPECT_EQ(back->str1, e.str1);
}

}  // namespace
}  // namespace vmmd::rpc
