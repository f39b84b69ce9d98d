// The RDMA protocol's wire formats, byte for byte as QEMU 7.2's migration/rdma.c lays them out
// (RDMACapabilities, RDMAControlHeader, RDMADestBlock, RDMARegister, RDMARegisterResult,
// RDMACompress: packed, network byte order), our extensions beside them, and what a hostile
// or confused peer sends refused with a clear reason.
#include "proto/wire.h"

#include <gtest/gtest.h>

namespace rdma_migrate {

namespace {
Message decode_ok(const std::vector<uint8_t>& bytes) {
    auto m = decode_message(bytes);
    EXPECT_TRUE(m) << m.error().message();
    return m ? std::move(*m) : Message{};
}

void be32(std::vector<uint8_t>& b, uint32_t v) {
    for (int i = 3; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void be64(std::vector<uint8_t>& b, uint64_t v) {
    be32(b, static_cast<uint32_t>(v >> 32));
    be32(b, static_cast<uint32_t>(v));
}

// A control message as QEMU builds it: the 16-byte header (padding as given: QEMU leaves it
// uninitialised), then the data.
std::vector<uint8_t> qemu_message(uint32_t length, uint32_t type, uint32_t repeat, const std::vector<uint8_t>& data,
                                  uint32_t padding = 0) {
    std::vector<uint8_t> b;
    be32(b, length);
    be32(b, type);
    be32(b, repeat);
    be32(b, padding);
    b.insert(b.end(), data.begin(), data.end());
    return b;
}
}  // namespace

TEST(PrivateData, TheBaseProtocolIsQemusEightBytes) {
    auto bytes = encode_private_data({1, kCapPinAll});
    EXPECT_EQ(bytes, (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 1}));
}

// RDMA-CM pads private data with zeros: 56 bytes on a connect, 196 on an accept over RoCE. A
// base-protocol peer's 8 bytes, padded or not, and whatever follows them, are the base protocol.
TEST(PrivateData, QemusEightBytesMeanTheBaseProtocolWhateverThePadding) {
    for (size_t padded : {8, 32, 56, 196}) {
        std::vector<uint8_t> qemu{0, 0, 0, 1, 0, 0, 0, 1};
        qemu.resize(padded, 0);
        auto p = decode_private_data(qemu);
        ASSERT_TRUE(p) << padded << ": " << p.error().message();
        EXPECT_EQ(p->flags, kCapPinAll);
        EXPECT_EQ(p->channels, 1u);
        EXPECT_EQ(p->chunk_shift, kBaseChunkShift);  // QEMU's 1 MiB chunks
    }
    std::vector<uint8_t> garbage_after{0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 9, 9, 9, 9};
    garbage_after.resize(56, 0xee);
    auto p = decode_private_data(garbage_after);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(*p, (PrivateData{1, 0}));
}

TEST(PrivateData, ExtensionsTravelInTheBlockAfterTheBaseBytes) {
    PrivateData p{1, kCapPinAll | kCapChannels | kCapChunkSize | kCapBatch | kCapErrorText, 1, 2, 0x1122334455667788ull, 21};
    auto bytes = encode_private_data(p);
    ASSERT_EQ(bytes.size(), kPrivateDataSize);
    ASSERT_LE(bytes.size(), kPrivateDataMax);
    EXPECT_EQ(bytes[7], 0x1f);  // flags, big-endian
    EXPECT_EQ(bytes[11], 1);    // channel
    EXPECT_EQ(bytes[15], 2);    // channels
    EXPECT_EQ(bytes[27], 21);   // chunk shift (2 MiB)
    auto back = decode_private_data(bytes);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, p);
    // An extension not flagged keeps its base value, whatever the block holds.
    auto no_chunk = encode_private_data({1, kCapBatch, 0, 1, 0, 16});
    EXPECT_EQ(no_chunk[27], 0);
    EXPECT_EQ(decode_private_data(no_chunk)->chunk_shift, kBaseChunkShift);
}

TEST(PrivateData, RefusesOtherVersionsShortDataAndBadExtensions) {
    std::vector<uint8_t> v2{0, 0, 0, 2, 0, 0, 0, 0};
    EXPECT_EQ(decode_private_data(v2).error().message(),
              "the peer speaks RDMA migration protocol version 2, this vmm version 1: use the same vmm release on both sides");
    EXPECT_FALSE(decode_private_data(std::vector<uint8_t>{0, 0, 0, 1}));
    std::vector<uint8_t> flagged_but_short{0, 0, 0, 1, 0, 0, 0, 2};
    EXPECT_EQ(decode_private_data(flagged_but_short).error().message(),
              "RDMA private data announces extensions 0x2 but is only 8 bytes");
    auto bad = encode_private_data({1, kCapChannels, 3, 2, 7});
    EXPECT_EQ(decode_private_data(bad).error().message(), "RDMA private data: channel 3 of 2 is not valid");
    auto zero = encode_private_data({1, kCapChannels, 0, 0, 7});
    EXPECT_FALSE(decode_private_data(zero));
    auto huge_chunk = encode_private_data({1, kCapChunkSize, 0, 1, 0, 40});
    EXPECT_EQ(decode_private_data(huge_chunk).error().message(),
              "RDMA private data: chunk size 2^40 is outside 1 MiB..1 GiB (x-rdma-chunk-size)");
    // Below QEMU 11.1's least, 1 MiB: what an older vmm with 64 KiB chunks would announce.
    auto small_chunk = encode_private_data({1, kCapChunkSize, 0, 1, 0, 16});
    EXPECT_EQ(decode_private_data(small_chunk).error().message(),
              "RDMA private data: chunk size 2^16 is outside 1 MiB..1 GiB (x-rdma-chunk-size)");
}

// Each body, byte for byte as QEMU's packed structs (RDMADestBlock, RDMARegister,
// RDMARegisterResult, RDMACompress) after QEMU's 16-byte header.
TEST(ControlMessages, EveryBodyIsLaidOutAsQemusStructs) {
    std::vector<uint8_t> block;
    be64(block, 0x7f0000000000);  // remote_host_addr
    be64(block, 0x10000000);      // offset
    be64(block, 256 << 20);       // length
    be32(block, 0x1234);          // remote_rkey
    be32(block, 0);               // padding
    EXPECT_EQ(encode_blocks({{0x7f0000000000, 0x10000000, 256 << 20, 0x1234}}), qemu_message(32, 5, 1, block));

    std::vector<uint8_t> reg;
    be64(reg, 0x10300000);  // key.current_addr
    be32(reg, 1);           // current_index
    be32(reg, 0);           // padding
    be64(reg, 0);           // chunks
    EXPECT_EQ(encode_register_entries(Command::register_request, {{0x10300000, 1, 0}}), qemu_message(24, 7, 1, reg));

    std::vector<uint8_t> result;
    be32(result, 0xabcd);         // rkey
    be32(result, 0);              // padding
    be64(result, 0x7f0000000000);  // host_addr
    EXPECT_EQ(encode_register_results({{0xabcd, 0x7f0000000000}}), qemu_message(16, 8, 1, result));

    std::vector<uint8_t> comp;
    be32(comp, 0);            // value
    be32(comp, 2);            // block_idx
    be64(comp, 0x10200000);   // offset
    be64(comp, 1 << 20);      // length
    EXPECT_EQ(encode_compress({{0, 2, 0x10200000, 1 << 20}}), qemu_message(24, 6, 1, comp));

    EXPECT_EQ(encode_empty(Command::ready), qemu_message(0, 2, 1, {}));
    EXPECT_EQ(encode_error("why", false), qemu_message(0, 1, 1, {}));  // QEMU's ERROR: no text
}

TEST(ControlMessages, EveryTypeRoundTrips) {
    std::vector<BlockDesc> blocks{{0x7f0000000000, 0, 256 << 20, 0x1234}, {0x7f1000000000, 256 << 20, 1ull << 30, 0}};
    auto b = decode_blocks(decode_ok(encode_blocks(blocks)));
    ASSERT_TRUE(b);
    EXPECT_EQ(*b, blocks);

    std::vector<RegisterEntry> entries{{5 << 20, 0, 2}, {0, 1, 0}};
    for (Command c : {Command::register_request, Command::unregister_request}) {
        Message m = decode_ok(encode_register_entries(c, entries));
        EXPECT_EQ(m.header.type, c);
        EXPECT_EQ(m.header.repeat, 2u);
        EXPECT_EQ(*decode_register_entries(m), entries);
    }
    std::vector<RegisterResult> results{{0xabcd, 0x7f0000100000}, {7, 8}};
    EXPECT_EQ(*decode_register_results(decode_ok(encode_register_results(results))), results);
    std::vector<Compress> zs{{0, 1, 4096, 1 << 20}, {0, 0, 0, 8192}};
    EXPECT_EQ(*decode_compress(decode_ok(encode_compress(zs))), zs);
    EXPECT_EQ(decode_error(decode_ok(encode_error("RAM block 'x' differs"))), "RAM block 'x' differs");
    EXPECT_EQ(decode_error(decode_ok(encode_error("x", false))), "the peer reported an error without a reason");
    for (Command c : {Command::ready, Command::ram_blocks_request, Command::register_finished, Command::unregister_finished}) {
        Message m = decode_ok(encode_empty(c));
        EXPECT_EQ(m.header.type, c);
        EXPECT_TRUE(m.data.empty());
    }
    std::vector<uint8_t> file{1, 2, 3, 4, 5};
    Message f = decode_ok(encode_message(Command::qemu_file, 1, file));
    EXPECT_EQ(f.data, file);
}

// What QEMU sends that a strict reading of the spec would refuse, taken as QEMU means it.
TEST(ControlMessages, QemusOwnHeadersAreTakenAsQemuMeansThem) {
    // QEMU FILE: repeat and padding are uninitialised stack words.
    Message f = decode_ok(qemu_message(3, 3, 0xdeadbeef, {'Q', 'E', 'V'}, 0xcafef00d));
    EXPECT_EQ(f.data, (std::vector<uint8_t>{'Q', 'E', 'V'}));
    // RAM BLOCKS RESULT: repeat 1, the count in the length.
    std::vector<uint8_t> three(3 * kBlockDescSize, 0);
    auto blocks = decode_blocks(decode_ok(qemu_message(static_cast<uint32_t>(three.size()), 5, 1, three)));
    ASSERT_TRUE(blocks);
    EXPECT_EQ(blocks->size(), 3u);
    // REGISTER RESULT: repeat copied from the request, one 16-byte result carried.
    std::vector<uint8_t> one(kRegisterResultSize, 0);
    auto results = decode_register_results(decode_ok(qemu_message(16, 8, 4, one)));
    ASSERT_TRUE(results);
    EXPECT_EQ(results->size(), 1u);
    // UNREGISTER FINISHED: repeat copied from the request.
    EXPECT_EQ(decode_ok(qemu_message(0, 11, 3, {})).header.type, Command::unregister_finished);
}

TEST(ControlMessages, RepeatUpTo4096IsAcceptedAndEveryEntryDecoded) {
    std::vector<RegisterEntry> many(kMaxRepeat);
    for (uint32_t i = 0; i < kMaxRepeat; ++i) many[i] = {uint64_t{i} << 20, i % 3, 0};
    auto bytes = encode_register_entries(Command::register_request, many);
    ASSERT_LE(bytes.size(), kControlBufferSize);
    auto back = decode_register_entries(decode_ok(bytes));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->size(), kMaxRepeat);
    EXPECT_EQ((*back)[4095], (RegisterEntry{uint64_t{4095} << 20, 4095 % 3, 0}));
}

TEST(ControlMessages, HostileHeadersAreRefused) {
    auto msg = [](const std::vector<uint8_t>& b) { return decode_message(b).error().message(); };
    std::vector<uint8_t> ten(10, 0), entry(24, 0);
    EXPECT_EQ(msg({1, 2, 3}), "RDMA control message of 3 bytes is shorter than its header");
    EXPECT_EQ(msg(std::vector<uint8_t>(12, 0)), "RDMA control message of 12 bytes is shorter than its header");
    EXPECT_EQ(msg(qemu_message(0, 99, 1, {})), "RDMA control message of unknown type 99");
    EXPECT_EQ(msg(qemu_message(0, 0, 1, {})), "RDMA control message of unknown type 0");
    EXPECT_EQ(msg(qemu_message(100, 3, 1, ten)), "RDMA QEMU FILE says 100 data bytes but carries 10");
    EXPECT_EQ(msg(qemu_message(0xffffffff, 3, 1, ten)), "RDMA QEMU FILE says 4294967295 data bytes but carries 10");
    EXPECT_EQ(msg(qemu_message(24, 7, 0, entry)), "RDMA REGISTER REQUEST repeats 0 times (1 to 4096 allowed)");
    EXPECT_EQ(msg(qemu_message(24, 7, 4097, entry)), "RDMA REGISTER REQUEST repeats 4097 times (1 to 4096 allowed)");
    EXPECT_EQ(msg(qemu_message(24, 7, 2, entry)), "RDMA REGISTER REQUEST: 2 entries need 48 bytes, the message has 24");
    EXPECT_EQ(msg(qemu_message(24, 5, 1, entry)), "RDMA RAM BLOCKS RESULT: 24 bytes are not 1 to 4096 entries of 32 bytes");
    EXPECT_EQ(msg(qemu_message(0, 8, 1, {})), "RDMA REGISTER RESULT: 0 bytes are not 1 to 4096 entries of 16 bytes");
    EXPECT_EQ(msg(qemu_message(4, 2, 1, {0, 0, 0, 0})), "RDMA READY must carry no data");
    EXPECT_FALSE(decode_message(std::vector<uint8_t>(kControlBufferSize + 1, 0)));
}

// TLS (ours, kCapTls): record bytes, any number of them but none; the session reads them as a stream.
TEST(ControlMessages, TlsCarriesRecordBytesAndNeverNone) {
    std::vector<uint8_t> record{23, 3, 3, 0, 1, 0xee};
    Message m = decode_ok(encode_message(Command::tls, 1, record));
    EXPECT_EQ(m.header.type, Command::tls);
    EXPECT_EQ(m.data, record);
    EXPECT_EQ(to_string(Command::tls), std::string("TLS"));
    EXPECT_EQ(decode_message(qemu_message(0, 65, 1, {})).error().message(), "RDMA TLS message with no record bytes");
    EXPECT_EQ(decode_message(qemu_message(0, 66, 1, {})).error().message(), "RDMA control message of unknown type 66");
}

// Inside TLS the messages are a stream: each header says how much of it is one message.
TEST(ControlMessages, InsideTlsEachHeaderSaysWhereTheNextMessageStarts) {
    auto two = encode_sums({{0, 0, {1, 2}}});
    EXPECT_EQ(*message_size_in_stream(two), two.size());
    EXPECT_EQ(message_size_in_stream({two.data(), 10}).error().message(), "RDMA control message header cut short");
    std::vector<uint8_t> huge = qemu_message(static_cast<uint32_t>(kControlBufferSize), 3, 1, {});
    EXPECT_EQ(message_size_in_stream(huge).error().message(),
              "RDMA control message in TLS announces 524288 bytes, more than a control buffer holds");
}

// The authenticated flag travels in the extension block's flags like the others.
TEST(PrivateData, TheTlsFlagRoundTrips) {
    PrivateData p;
    p.flags = kCapTls | kCapSums;
    auto back = decode_private_data(encode_private_data(p));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->flags & kCapTls, kCapTls);
}

TEST(ControlMessages, TypedDecodersCheckTheTypeAndTheContents) {
    Message ready = decode_ok(encode_empty(Command::ready));
    EXPECT_EQ(decode_register_results(ready).error().message(), "RDMA control channel: expected REGISTER RESULT, received READY");
    EXPECT_FALSE(decode_register_entries(ready));
    EXPECT_FALSE(decode_blocks(ready));
    auto c = encode_compress({{0x1ff, 0, 0, 4096}});
    EXPECT_EQ(decode_compress(decode_ok(c)).error().message(), "RDMA COMPRESS fill value 511 is not a byte");
}

// SUMS (ours, kCapSums): entries of {u32 block, u32 count, u64 offset} + count u64 sums.
TEST(ControlMessages, SumsRoundTripLaidOutAsDocumented) {
    std::vector<SumsEntry> entries{{1, 0x3000, {0x1122334455667788, 2}}, {0, 0, {3}}};
    auto bytes = encode_sums(entries);
    Message m = decode_ok(bytes);
    EXPECT_EQ(m.header.type, Command::sums);
    EXPECT_EQ(m.header.repeat, 2u);
    ASSERT_EQ(m.data.size(), 16u + 16 + 16 + 8);
    EXPECT_EQ(std::vector<uint8_t>(m.data.begin(), m.data.begin() + 24),
              (std::vector<uint8_t>{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0x30, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}));
    EXPECT_EQ(*decode_sums(m), entries);
    EXPECT_EQ(to_string(Command::sums), std::string("SUMS"));
}

TEST(ControlMessages, HostileSumsAreRefused) {
    auto sums = [](uint32_t repeat, const std::vector<uint8_t>& data) {
        auto m = decode_message(qemu_message(static_cast<uint32_t>(data.size()), 64, repeat, data));
        if (!m) return m.error().message();
        auto e = decode_sums(*m);
        return e ? std::string("ok") : e.error().message();
    };
    std::vector<uint8_t> one{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_EQ(sums(1, one), "ok");
    EXPECT_EQ(sums(0, one), "RDMA SUMS: 0 entries in 24 bytes (1 to 4096 entries of 16 bytes and more)");
    EXPECT_EQ(sums(2, one), "RDMA SUMS: 2 entries in 24 bytes (1 to 4096 entries of 16 bytes and more)");
    auto zero = one;
    zero[7] = 0;  // count 0
    EXPECT_EQ(sums(1, zero), "RDMA SUMS: entry 1 announces 0 sums, 8 bytes are left");
    auto many = one;
    many[4] = 0xff;  // count far past the message
    EXPECT_EQ(sums(1, many), "RDMA SUMS: entry 1 announces 4278190081 sums, 8 bytes are left");
    auto trailing = one;
    trailing.insert(trailing.end(), 4, 0);
    EXPECT_EQ(sums(1, trailing), "RDMA SUMS: 4 bytes after the last of 1 entries");
    auto cut = one;
    cut.insert(cut.end(), 16, 0);  // a second entry's header, no sums
    EXPECT_EQ(sums(2, cut), "RDMA SUMS: entry 2 announces 0 sums, 0 bytes are left");
}

}  // namespace rdma_migrate
