// The RDMA protocol's wire formats: every control message and the private data round-trip,
// and what a hostile or confused peer sends is refused with a clear reason.
#include "wire.h"

#include <gtest/gtest.h>

namespace rdma_migrate {

namespace {
Message decode_ok(const std::vector<uint8_t>& bytes) {
    auto m = decode_message(bytes);
    EXPECT_TRUE(m) << m.error().message();
    return m ? std::move(*m) : Message{};
}

std::vector<uint8_t> raw(uint32_t length, uint32_t type, uint32_t repeat, size_t data = 0) {
    std::vector<uint8_t> b = encode_message(static_cast<Command>(type), repeat, std::vector<uint8_t>(data, 0));
    b[0] = static_cast<uint8_t>(length >> 24);
    b[1] = static_cast<uint8_t>(length >> 16);
    b[2] = static_cast<uint8_t>(length >> 8);
    b[3] = static_cast<uint8_t>(length);
    return b;
}
}  // namespace

TEST(PrivateData, RoundTripsInNetworkOrder) {
    PrivateData p{1, kCapPinAll | kCapChannels, 1, 2, 0x1122334455667788ull, 16};
    auto bytes = encode_private_data(p);
    ASSERT_EQ(bytes.size(), kPrivateDataSize);
    ASSERT_LE(bytes.size(), kPrivateDataMax);
    EXPECT_EQ(bytes[3], 1);  // version 1, big-endian
    EXPECT_EQ(bytes[7], 3);
    auto back = decode_private_data(bytes);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, p);
}

TEST(PrivateData, AcceptsTheSpecsEightByteForm) {
    std::vector<uint8_t> spec{0, 0, 0, 1, 0, 0, 0, 1};
    auto p = decode_private_data(spec);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->flags, kCapPinAll);
    EXPECT_EQ(p->channels, 1u);
    EXPECT_EQ(p->chunk_shift, 20u);  // the spec's 1 MiB chunks
}

TEST(PrivateData, RefusesOtherVersionsShortDataAndBadChannels) {
    std::vector<uint8_t> v2{0, 0, 0, 2, 0, 0, 0, 0};
    EXPECT_EQ(decode_private_data(v2).error().message(),
              "the peer speaks RDMA migration protocol version 2, this vmm version 1: use the same vmm release on both sides");
    EXPECT_FALSE(decode_private_data(std::vector<uint8_t>{0, 0, 0, 1}));
    auto bad = encode_private_data({1, kCapChannels, 3, 2, 7});
    EXPECT_EQ(decode_private_data(bad).error().message(), "RDMA private data: channel 3 of 2 is not valid");
    auto zero = encode_private_data({1, kCapChannels, 0, 0, 7});
    EXPECT_FALSE(decode_private_data(zero));
    auto huge_chunk = encode_private_data({1, 0, 0, 1, 0, 40});
    EXPECT_EQ(decode_private_data(huge_chunk).error().message(), "RDMA private data: chunk size 2^40 is outside 4 KiB..1 GiB");
}

TEST(ControlMessages, EveryTypeRoundTrips) {
    std::vector<BlockDesc> blocks{{"pc.ram", 0x7f0000000000, 0, 256 << 20, 0x1234}, {"high.ram", 0x7f1000000000, 4ull << 30, 1ull << 30, 0}};
    auto b = decode_blocks(decode_ok(encode_blocks(blocks)));
    ASSERT_TRUE(b);
    EXPECT_EQ(*b, blocks);

    std::vector<ChunkRange> ranges{{0, 5, 3}, {1, 0, 1}};
    for (Command c : {Command::register_request, Command::unregister_request}) {
        Message m = decode_ok(encode_chunk_ranges(c, ranges));
        EXPECT_EQ(m.header.type, c);
        EXPECT_EQ(m.header.repeat, 2u);
        EXPECT_EQ(*decode_chunk_ranges(m), ranges);
    }
    std::vector<RegisterResult> results{{0xabcd, 0x7f0000100000}, {7, 8}};
    EXPECT_EQ(*decode_register_results(decode_ok(encode_register_results(results))), results);
    std::vector<Compress> zs{{0, 1, 4096, 1 << 20}};
    EXPECT_EQ(*decode_compress(decode_ok(encode_compress(zs))), zs);
    EXPECT_EQ(decode_error(decode_ok(encode_error("RAM block 'x' differs"))), "RAM block 'x' differs");
    for (Command c : {Command::ready, Command::ram_blocks_request, Command::register_finished, Command::unregister_finished}) {
        Message m = decode_ok(encode_empty(c));
        EXPECT_EQ(m.header.type, c);
        EXPECT_TRUE(m.data.empty());
    }
    std::vector<uint8_t> file{1, 2, 3, 4, 5};
    Message f = decode_ok(encode_message(Command::qemu_file, 1, file));
    EXPECT_EQ(f.data, file);
}

TEST(ControlMessages, RepeatUpTo4096IsAcceptedAndEveryEntryDecoded) {
    std::vector<ChunkRange> many(kMaxRepeat);
    for (uint32_t i = 0; i < kMaxRepeat; ++i) many[i] = {i % 3, i, 1};
    auto bytes = encode_chunk_ranges(Command::register_request, many);
    ASSERT_LE(bytes.size(), kControlBufferSize);
    auto back = decode_chunk_ranges(decode_ok(bytes));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->size(), kMaxRepeat);
    EXPECT_EQ((*back)[4095], (ChunkRange{4095 % 3, 4095, 1}));
}

TEST(ControlMessages, HostileHeadersAreRefused) {
    auto msg = [](const std::vector<uint8_t>& b) { return decode_message(b).error().message(); };
    EXPECT_EQ(msg({1, 2, 3}), "RDMA control message of 3 bytes is shorter than its header");
    EXPECT_EQ(msg(raw(0, 99, 1)), "RDMA control message of unknown type 99");
    EXPECT_EQ(msg(raw(0, 0, 1)), "RDMA control message of unknown type 0");
    EXPECT_EQ(msg(raw(100, 3, 1, 10)), "RDMA QEMU FILE says 100 data bytes but carries 10");
    EXPECT_EQ(msg(raw(0xffffffff, 3, 1, 10)), "RDMA QEMU FILE says 4294967295 data bytes but carries 10");
    EXPECT_EQ(msg(raw(24, 7, 0, 24)), "RDMA REGISTER REQUEST repeats 0 times (1 to 4096 allowed)");
    EXPECT_EQ(msg(raw(24, 7, 4097, 24)), "RDMA REGISTER REQUEST repeats 4097 times (1 to 4096 allowed)");
    EXPECT_EQ(msg(raw(24, 7, 2, 24)), "RDMA REGISTER REQUEST: 2 entries need 48 bytes, the message has 24");
    EXPECT_EQ(msg(raw(4, 2, 1, 4)), "RDMA READY must carry no data");
    EXPECT_FALSE(decode_message(std::vector<uint8_t>(kControlBufferSize + 1, 0)));
}

TEST(ControlMessages, TypedDecodersCheckTheTypeAndTheContents) {
    Message ready = decode_ok(encode_empty(Command::ready));
    EXPECT_EQ(decode_register_results(ready).error().message(), "RDMA control channel: expected REGISTER RESULT, received READY");
    EXPECT_FALSE(decode_chunk_ranges(ready));
    auto c = encode_compress({{0x1ff, 0, 0, 4096}});
    EXPECT_EQ(decode_compress(decode_ok(c)).error().message(), "RDMA COMPRESS fill value 511 is not a byte");
    auto b = encode_blocks({{"x", 1, 2, 3, 4}});
    b[kHeaderSize + 63] = 'y';  // name without its terminator
    EXPECT_EQ(decode_blocks(decode_ok(b)).error().message(), "RDMA RAM block 0: name is not terminated");
    auto unnamed = encode_blocks({{"", 1, 2, 3, 4}});
    EXPECT_FALSE(decode_blocks(decode_ok(unnamed)));
}

}  // namespace rdma_migrate
