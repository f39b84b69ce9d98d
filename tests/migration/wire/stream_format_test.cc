#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

#include <gtest/gtest.h>

namespace vmm::migration {

namespace {
StreamHeader sample_header() {
    StreamHeader h;
    h.vcpu_count = 2;
    h.blocks = {{"pc.ram", 0, 256ull << 20}, {"high", 4ull << 30, 1ull << 30}};
    return h;
}

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Result<Record> decode(const std::vector<uint8_t>& bytes) {
    stream::MemoryStream in(bytes);
    return read_record(in, sample_header().blocks, 4096);
}
}  // namespace

TEST(StreamHeader, RoundTrips) {
    stream::MemoryStream in(encode_header(sample_header()));
    auto h = read_header(in);
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(h->vcpu_count, 2u);
    EXPECT_EQ(h->blocks, sample_header().blocks);
    EXPECT_EQ(h->ram_mode, RamMode::inline_pages);
    EXPECT_EQ(in.remaining(), 0u);
}

// verify-ram's ways: inline sums, a channel's round sums on the stream, or sums the channel carries.
TEST(StreamHeader, FeatureBitsThatContradictEachOtherAreRefused) {
    auto with = [](uint32_t features, RamMode mode) {
        StreamHeader h = sample_header();
        h.features = features;
        h.ram_mode = mode;
        stream::MemoryStream in(encode_header(h));
        auto back = read_header(in);
        return back ? std::string("ok") : back.error().message();
    };
    auto channel = RamMode::transport_channel;
    EXPECT_EQ(with(kFeatureVerifyRam, RamMode::inline_pages), "ok");
    EXPECT_EQ(with(kFeatureVerifyRam | kFeatureRoundSums, channel), "ok");
    EXPECT_EQ(with(kFeatureVerifyRam | kFeatureChannelSums, channel), "ok");
    EXPECT_EQ(with(kFeatureVerifyRam | kFeatureRoundSums | kFeatureChannelSums, channel),
              "migration header: feature bits 0x7 contradict each other (a RAM channel's sums go one way, and only under "
              "verify-ram)");
    EXPECT_NE(with(kFeatureChannelSums, channel), "ok");  // sums without verify-ram
    EXPECT_NE(with(kFeatureVerifyRam | kFeatureChannelSums, RamMode::inline_pages), "ok");  // no channel to carry them
    EXPECT_NE(with(1u << 7, RamMode::inline_pages), "ok");
    // A resumable precopy, its pages inline or on a RAM channel (multifd's lanes), postcopy-ram's
    // precopy too; only it may be resumed, and never as a postcopy's resumption at once.
    EXPECT_EQ(with(kFeatureVerifyRam | kFeatureResumable | kFeaturePrecopyResume, RamMode::inline_pages), "ok");
    EXPECT_EQ(with(kFeatureResumable | kFeaturePrecopyResume, channel), "ok");
    EXPECT_EQ(with(kFeatureResumable | kFeaturePostcopy, RamMode::inline_pages), "ok");
    EXPECT_EQ(with(kFeatureResumable | kFeaturePrecopyResume | kFeaturePostcopy, channel), "ok");
    EXPECT_NE(with(kFeaturePrecopyResume, RamMode::inline_pages), "ok");
    EXPECT_EQ(with(kFeatureResumable | kFeaturePostcopyResume | kFeaturePostcopy, channel),
              "migration header: a precopy's resumption and a postcopy's at once");
    EXPECT_NE(with(kFeaturePrecopyResume | kFeatureResumable | kFeaturePostcopyResume | kFeaturePostcopy, channel), "ok");
    // Rounds answered once landed: on a RAM channel only, with sums or without.
    EXPECT_EQ(with(kFeatureRoundLanded, channel), "ok");
    EXPECT_EQ(with(kFeatureRoundLanded | kFeatureVerifyRam | kFeatureRoundSums | kFeatureResumable, channel), "ok");
    EXPECT_EQ(with(kFeatureRoundLanded, RamMode::inline_pages),
              "migration header: rounds landed on a RAM channel, but the RAM comes inline");
}

TEST(StreamHeader, RefusesBadMagicVersionLengthAndTruncation) {
    auto good = encode_header(sample_header());
    auto bad_magic = good;
    bad_magic[0] = 'X';
    stream::MemoryStream m1(bad_magic);
    EXPECT_EQ(read_header(m1).error().message(),
              "this is not a vmm migration stream (bad magic): is the source a vmm of this project?");
    auto bad_version = good;
    bad_version[8] = 1;  // the version before HEADER_OK carried the hand-over rehearsal
    stream::MemoryStream m2(bad_version);
    EXPECT_EQ(read_header(m2).error().message(),
              "migration stream version 1 is not supported (this vmm speaks version 3): use the same vmm release on both sides");
    auto huge = good;
    huge[14] = 0x10;  // body length 0x100000+
    stream::MemoryStream m3(huge);
    EXPECT_NE(read_header(m3).error().message().find("exceeds the 65536 byte limit"), std::string::npos);
    for (size_t cut : {size_t{3}, size_t{12}, good.size() - 1}) {
        stream::MemoryStream m(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(cut)));
        EXPECT_FALSE(read_header(m)) << cut;
    }
}

// QEMU's stream starts with QEMU_VM_FILE_MAGIC and QEMU_VM_FILE_VERSION: named as QEMU's.
TEST(StreamHeader, QemusStreamIsNamedAsSuch) {
    stream::MemoryStream qemu(std::vector<uint8_t>{'Q', 'E', 'V', 'M', 0, 0, 0, 3, 7, 0, 0, 0});
    EXPECT_EQ(read_magic(qemu).error().message(),
              "the source sent QEMU's migration stream (magic QEVM, version 3): vmm cannot load a QEMU guest; migrate it "
              "to a QEMU destination");
    stream::MemoryStream ours(encode_header(sample_header()));
    ASSERT_TRUE(read_magic(ours));
    auto h = read_header_after_magic(ours);
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(h->vcpu_count, 2u);
}

TEST(StreamHeader, CompatibilityNamesTheDifference) {
    auto local = sample_header();
    auto src = sample_header();
    EXPECT_TRUE(check_compatible(src, local));
    src.blocks[0].size = 512ull << 20;
    EXPECT_EQ(check_compatible(src, local).error().message(),
              "RAM block 'pc.ram' is 512 MiB at 0x0 on the source but 256 MiB at 0x0 here: start the destination with "
              "the same memory size (-m 512M)");
    src = sample_header();
    src.vcpu_count = 4;
    EXPECT_EQ(check_compatible(src, local).error().message(),
              "the source has 4 vCPUs, this destination 2: start it with --smp 4");
    src = sample_header();
    src.blocks.pop_back();
    EXPECT_FALSE(check_compatible(src, local));
}

TEST(Records, RoundTripEveryType) {
    for (Record r : {Record{RecordType::round_begin, 0, 0, 0, 7}, Record{RecordType::pages, 1, 4096, 8192, 0},
                     Record{RecordType::zero, 0, 0, 1ull << 20, 0}, Record{RecordType::round_end, 0, 0, 0, 7},
                     Record{RecordType::state, 0, 0, 1234, 0}, Record{RecordType::end, 0, 0, 0, 0},
                     Record{RecordType::populate, 1, 8192, 64ull << 20, 0},
                     Record{RecordType::session, 0, 0, 0, 12, 0x8badf00ddeadbeefull, 30000}}) {
        auto back = decode(encode_record(r));
        ASSERT_TRUE(back) << back.error().message();
        EXPECT_EQ(back->type, r.type);
        EXPECT_EQ(back->block, r.block);
        EXPECT_EQ(back->offset, r.offset);
        EXPECT_EQ(back->length, r.length);
        EXPECT_EQ(back->round, r.round);
        EXPECT_EQ(back->session, r.session);
        EXPECT_EQ(back->window_ms, r.window_ms);
    }
}

TEST(Records, HostileRangesAreRefusedBeforeUse) {
    auto msg = [](Record r) { return decode(encode_record(r)).error().message(); };
    EXPECT_EQ(msg({RecordType::pages, 2, 0, 4096, 0}), "migration stream: RAM block index 2 (there are 2)");
    EXPECT_EQ(msg({RecordType::pages, 0, 256ull << 20, 4096, 0}),
              "migration stream: range 0x10000000+0x1000 lies outside RAM block 'pc.ram' (256 MiB)");
    EXPECT_EQ(msg({RecordType::zero, 0, (256ull << 20) - 4096, 8192, 0}),
              "migration stream: range 0xffff000+0x2000 lies outside RAM block 'pc.ram' (256 MiB)");
    EXPECT_EQ(msg({RecordType::zero, 0, 4096, UINT64_MAX - 4095, 0}),
              "migration stream: range 0x1000+0xfffffffffffff000 lies outside RAM block 'pc.ram' (256 MiB)");
    EXPECT_EQ(msg({RecordType::populate, 0, 4096, 256ull << 20, 0}),
              "migration stream: range 0x1000+0x10000000 lies outside RAM block 'pc.ram' (256 MiB)");
    EXPECT_EQ(msg({RecordType::pages, 0, 100, 4096, 0}), "migration stream: range 0x64+0x1000 in 'pc.ram' is not whole pages");
    EXPECT_EQ(msg({RecordType::zero, 0, 0, 0, 0}), "migration stream: range 0x0+0x0 in 'pc.ram' is not whole pages");
    EXPECT_EQ(msg({RecordType::pages, 0, 0, 8u << 20, 0}), "migration stream: PAGES record of 8388608 bytes exceeds 4194304");
    EXPECT_EQ(msg({RecordType::state, 0, 0, 65u << 20, 0}), "migration stream: STATE record of 68157440 bytes exceeds 67108864");
    EXPECT_EQ(decode({0x42}).error().message(), "migration stream: unknown record type 0x42");
    EXPECT_FALSE(decode({0x02, 0, 0}));
}

TEST(Replies, RoundTripWithReasons) {
    stream::MemoryStream in(cat(encode_reply(ReplyType::refused, "RAM differs"), encode_reply(ReplyType::ready)));
    auto r1 = read_reply(in);
    ASSERT_TRUE(r1);
    EXPECT_EQ(r1->type, ReplyType::refused);
    EXPECT_EQ(r1->reason, "RAM differs");
    auto r2 = read_reply(in);
    ASSERT_TRUE(r2);
    EXPECT_EQ(r2->type, ReplyType::ready);
    stream::MemoryStream ok(cat(encode_header_ok(123456), encode_reply(ReplyType::header_ok)));
    auto h1 = read_reply(ok);
    ASSERT_TRUE(h1);
    EXPECT_EQ(h1->type, ReplyType::header_ok);
    EXPECT_EQ(h1->handover_us, 123456u);  // the destination's rehearsal travels with HEADER_OK
    EXPECT_EQ(read_reply(ok)->handover_us, 0u);
    stream::MemoryStream cut(std::vector<uint8_t>{0x80, 1, 2});  // HEADER_OK without its whole field
    EXPECT_FALSE(read_reply(cut));
    stream::MemoryStream go(cat(encode_reply(ReplyType::go), encode_reply(ReplyType::go_paused)));
    EXPECT_EQ(read_reply(go)->type, ReplyType::go);
    EXPECT_EQ(read_reply(go)->type, ReplyType::go_paused);
    stream::MemoryStream junk(std::vector<uint8_t>{0x10});
    EXPECT_FALSE(read_reply(junk));
    stream::MemoryStream checked(encode_reply(ReplyType::round_checked));
    EXPECT_EQ(read_reply(checked)->type, ReplyType::round_checked);
    stream::MemoryStream commit(cat(encode_reply(ReplyType::running), encode_reply(ReplyType::done)));
    EXPECT_EQ(read_reply(commit)->type, ReplyType::running);
    EXPECT_EQ(read_reply(commit)->type, ReplyType::done);
    stream::MemoryStream past(std::vector<uint8_t>{0x88});
    auto unknown = read_reply(past);
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().message(), "migration peer sent an unknown reply 0x88");
}

}  // namespace vmm::migration

namespace vmm::migration {

// The wire decoders take bytes, not a stream: the same checks without any I/O.
TEST(WireDecoders, WholeHeaderFromOneBufferAndEveryShortOneRefused) {
    std::vector<uint8_t> bytes = encode_header(sample_header());
    auto h = decode_header(bytes);
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(h->blocks, sample_header().blocks);
    for (size_t n = 0; n < bytes.size(); ++n) {
        auto cut = decode_header(std::span<const uint8_t>(bytes).first(n));
        ASSERT_FALSE(cut) << "a header cut to " << n << " bytes was accepted";
    }
}

TEST(WireDecoders, RecordFieldsMustBeExactlyTheSizeTheTypeSays) {
    std::vector<uint8_t> r = encode_record({RecordType::zero, 0, 4096, 8192, 0});
    std::span<const uint8_t> body = std::span<const uint8_t>(r).subspan(1);
    EXPECT_TRUE(decode_record(r[0], body, sample_header().blocks, 4096));
    EXPECT_FALSE(decode_record(r[0], body.first(body.size() - 1), sample_header().blocks, 4096));
    auto unknown = record_body_size(0x7f);
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message().find("unknown record type 0x7f"), std::string::npos) << unknown.error().message();
}

TEST(WireDecoders, ARefusalsReasonLengthIsBoundedBeforeAnythingIsRead) {
    std::vector<uint8_t> body = {0xff, 0xff, 0xff, 0x7f};  // a 2 GiB reason
    auto head = decode_reply(static_cast<uint8_t>(ReplyType::refused), body);
    ASSERT_FALSE(head);
    EXPECT_NE(head.error().message().find("over-long refusal"), std::string::npos) << head.error().message();
}

}  // namespace vmm::migration
