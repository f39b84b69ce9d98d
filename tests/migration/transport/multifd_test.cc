// Multifd without KVM: the hellos' encoding, the handshake (over streams that are not sockets:
// it takes any ByteStream), and rounds of RAM over lanes (unix socket pairs) between two
// in-process "guests", byte for byte; hostile lanes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <cstring>
#include <deque>
#include <thread>

#include "tests/support/pipe_stream.h"
#include "tests/support/socket_pair.h"
#include "vmm/common/mapping.h"
#include "vmm/migration/transport/multifd.h"
#include "vmm/migration/transport/socket_transport.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using namespace std::chrono_literals;

using vmm::test::unix_pair;

// One side's view of a migration's transport: options, cancel token, two RAM blocks.
struct Side {
    Options options;
    stream::CancelToken cancel = stream::CancelToken::create().value();
    std::vector<Mapping> ram;
    TransportContext ctx;
    explicit Side(bool source) {
        options.params.io_timeout_ms = 20000;
        for (uint64_t size : {uint64_t{12} << 20, uint64_t{1} << 20}) {
            ram.push_back(Mapping::map("ram", size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS).value());
            if (source && ram.size() == 1) {  // block 0: data; block 1: zero
                for (uint64_t i = 0; i < size; i += 8) std::memcpy(ram.back().data() + i, &i, 8);
            }
            ctx.blocks.push_back({"b" + std::to_string(ram.size()), ram.back().data(), size, 0});
        }
        ctx.options = [this] { return options; };
        ctx.cancel = &cancel;
    }
    bool same_as(const Side& o) const {
        for (size_t b = 0; b < ram.size(); ++b) {
            if (std::memcmp(ram[b].data(), o.ram[b].data(), ram[b].size()) != 0) return false;
        }
        return true;
    }
};

// N connected lanes: source streams and destination streams.
std::pair<Lanes, Lanes> lane_pairs(size_t n, Side& src, Side& dst) {
    Lanes s, d;
    for (size_t i = 0; i < n; ++i) {
        auto [a, b] = unix_pair();
        s.push_back(make_socket_stream(std::move(a), src.ctx, "destination"));
        d.push_back(make_socket_stream(std::move(b), dst.ctx, "source"));
    }
    return {std::move(s), std::move(d)};
}

using vmm::test::SigpipeIgnored;
}  // namespace

TEST(MultifdHello, RoundTripsAndRefusesWhatIsNotOne) {
    auto h = decode_hello(encode_hello({Hello::Kind::preface, 4, 0x1122334455667788ull}));
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(h->kind, Hello::Kind::preface);
    EXPECT_EQ(h->value, 4u);
    EXPECT_EQ(h->session, 0x1122334455667788ull);
    auto l = decode_hello(encode_hello({Hello::Kind::lane, 15, 9}));
    ASSERT_TRUE(l);
    EXPECT_EQ(l->kind, Hello::Kind::lane);
    EXPECT_EQ(l->value, 15u);

    auto bytes = encode_hello({Hello::Kind::lane, 1, 9});
    bytes[9] = 2;  // version 2 + 256 * ...
    EXPECT_NE(decode_hello(bytes).error().message().find("multifd version 513 is not supported"), std::string::npos);
    bytes = encode_hello({Hello::Kind::lane, 1, 9});
    bytes[0] = 'X';
    EXPECT_FALSE(decode_hello(bytes));
    EXPECT_NE(decode_hello(encode_hello({Hello::Kind::preface, 0, 9})).error().message().find("announces 0 lanes"),
              std::string::npos);
    EXPECT_FALSE(decode_hello(encode_hello({Hello::Kind::preface, kMaxLanes + 1, 9})));
    EXPECT_FALSE(decode_hello(encode_hello({Hello::Kind::lane, kMaxLanes, 9})));
    auto pre = decode_hello(encode_hello({Hello::Kind::preface, kPrefacePreempt, 9}));  // no lanes, a preempt connection
    ASSERT_TRUE(pre) << pre.error().message();
    EXPECT_EQ(pre->lanes(), 0u);
    EXPECT_TRUE(pre->preempt());
    auto pc = decode_hello(encode_hello({Hello::Kind::preempt, 0, 9}));
    ASSERT_TRUE(pc);
    EXPECT_EQ(pc->kind, Hello::Kind::preempt);
    EXPECT_FALSE(decode_hello(encode_hello({Hello::Kind::preempt, 1, 9})));
    EXPECT_NE(decode_hello(encode_hello({Hello::Kind::preface, 2 | (1u << 20), 9})).error().message().find("unknown flags"),
              std::string::npos);
    std::array<uint8_t, 8> plain{'V', 'M', 'M', 'M', 'I', 'G', 'R', '\n'};
    EXPECT_FALSE(starts_with_preface(plain));
    EXPECT_TRUE(starts_with_preface(std::span<const uint8_t, 8>(kPrefaceMagic)));
}

// Every connection here is a PipeStream: the handshake asks of its streams only what a
// ByteStream offers (a TLS session would do as well as a socket).
TEST(MultifdHandshake, LanesArriveInAnyOrderAndAPlainStreamKeepsItsBytes) {
    auto [smain, dmain] = test::pipe_stream_pair();
    // The source connects three lanes; the destination's accept hands them over last first.
    std::deque<std::unique_ptr<stream::ByteStream>> accepted;
    OpenStream connect = [&](std::string) -> Result<std::unique_ptr<stream::ByteStream>> {
        auto [a, b] = test::pipe_stream_pair();
        accepted.push_front(std::move(b));
        return std::move(a);
    };
    auto lanes = open_side_connections(*smain, 3, true, connect);  // three lanes and a preempt connection
    ASSERT_TRUE(lanes) << lanes.error().message();
    OpenStream accept = [&](std::string) -> Result<std::unique_ptr<stream::ByteStream>> {
        auto c = std::move(accepted.front());
        accepted.pop_front();
        return c;
    };
    auto got = accept_side_connections(*dmain, accept);
    ASSERT_TRUE(got) << got.error().message();
    ASSERT_EQ(got->lanes.size(), 3u);
    ASSERT_TRUE(lanes->preempt && got->preempt);
    for (size_t i = 0; i < 3; ++i) {  // each lane is at its index: what lane i sends, lane i reads
        uint8_t b = static_cast<uint8_t>(i), r = 0xff;
        ASSERT_TRUE(lanes->lanes[i]->write(std::span<const uint8_t>(&b, 1)) && lanes->lanes[i]->flush());
        ASSERT_TRUE(got->lanes[i]->read_exact({&r, 1}));
        EXPECT_EQ(r, b);
    }
    uint8_t p = 0x5a, q = 0;  // and the preempt connection is the preempt connection
    ASSERT_TRUE(lanes->preempt->write(std::span<const uint8_t>(&p, 1)) && lanes->preempt->flush());
    ASSERT_TRUE(got->preempt->read_exact({&q, 1}));
    EXPECT_EQ(q, p);

    // No preface: the core reads the stream from its first byte (an in-memory stream this time).
    std::vector<uint8_t> header = encode_header({});
    stream::MemoryStream plain(header);
    auto none = accept_side_connections(plain, accept);
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->lanes.empty());
    EXPECT_FALSE(none->preempt);
    std::vector<uint8_t> again(header.size());
    ASSERT_TRUE(plain.read_exact(again));
    EXPECT_EQ(again, header);
    EXPECT_EQ(plain.remaining(), 0u);
}

// A lane of another session (another source on the same port, or nobody's) is skipped with a
// warning, not taken and not fatal: this migration's own lanes are waited for on.
TEST(MultifdHandshake, ALaneOfAnotherSessionIsSkipped) {
    Side src(true), dst(false);
    auto [main_s, main_d] = unix_pair();
    auto dmain = make_socket_stream(std::move(main_d), dst.ctx, "source");
    auto preface = encode_hello({Hello::Kind::preface, 2, 1});
    ASSERT_EQ(::write(main_s.get(), preface.data(), preface.size()), 24);
    UniqueFd keep;
    int asked = 0;
    OpenStream accept = [&](std::string peer) -> Result<std::unique_ptr<stream::ByteStream>> {
        if (++asked > 1) return Error("nothing more connects");
        auto [a, b] = unix_pair();
        auto hello = encode_hello({Hello::Kind::lane, 0, 2});  // session 2, not 1
        EXPECT_EQ(::write(a.get(), hello.data(), hello.size()), 24);
        keep = std::move(a);
        return make_socket_stream(std::move(b), dst.ctx, std::move(peer));
    };
    auto got = accept_side_connections(*dmain, accept);
    ASSERT_FALSE(got);
    EXPECT_EQ(asked, 2) << "the foreign lane ended the wait";
    EXPECT_NE(got.error().message().find("waiting for connection 1 of the 2"), std::string::npos) << got.error().message();
}

// A preempt connection the preface did not announce (or a second one) is refused.
TEST(MultifdHandshake, AnUnannouncedPreemptConnectionIsRefused) {
    Side src(true), dst(false);
    auto [main_s, main_d] = unix_pair();
    auto dmain = make_socket_stream(std::move(main_d), dst.ctx, "source");
    auto preface = encode_hello({Hello::Kind::preface, 1, 7});  // one lane, no preempt connection
    ASSERT_EQ(::write(main_s.get(), preface.data(), preface.size()), 24);
    UniqueFd keep;
    OpenStream accept = [&](std::string peer) -> Result<std::unique_ptr<stream::ByteStream>> {
        auto [a, b] = unix_pair();
        auto hello = encode_hello({Hello::Kind::preempt, 0, 7});
        EXPECT_EQ(::write(a.get(), hello.data(), hello.size()), 24);
        keep = std::move(a);
        return make_socket_stream(std::move(b), dst.ctx, std::move(peer));
    };
    auto got = accept_side_connections(*dmain, accept);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message().find("did not announce"), std::string::npos) << got.error().message();
}

TEST(MultifdLanes, RoundsOfPagesAndZerosLandByteForByte) {
    SigpipeIgnored sigpipe;
    Side src(true), dst(false);
    std::memset(dst.ram[1].data(), 0x55, dst.ram[1].size());  // must read as zero after a ZERO range
    auto [sl, dl] = lane_pairs(3, src, dst);
    auto source = make_source_lanes(std::move(sl), src.ctx.blocks, false);
    auto dest = make_dest_lanes(std::move(dl), dst.ctx.blocks);
    for (uint32_t round = 0; round < 2; ++round) {
        Status served;
        std::thread server([&] { served = dest->serve_round(round); });
        ASSERT_TRUE(source->begin_round(round));
        if (round == 0) {
            ASSERT_TRUE(source->send(0, 0, 12 << 20));  // three records of 4 MiB, one per lane
            ASSERT_TRUE(source->send_zero(1, 0, 1 << 20));
        } else {  // the guest changed two runs since
            std::memset(src.ram[0].data() + 4096, 0xab, 3 * 4096);
            std::memset(src.ram[0].data() + (9 << 20), 0xcd, 4096);
            ASSERT_TRUE(source->send(0, 4096, 3 * 4096));
            ASSERT_TRUE(source->send(0, 9 << 20, 4096));
        }
        Status ended = source->end_round();
        server.join();
        ASSERT_TRUE(ended) << ended.error().message();
        ASSERT_TRUE(served) << served.error().message();
        EXPECT_TRUE(src.same_as(dst)) << "round " << round;
    }
    auto counts = dest->counts();  // 12 MiB + 4 pages of data, 1 MiB of zeros
    EXPECT_EQ(counts.pages, (12u << 20) / 4096 + 4);
    EXPECT_EQ(counts.bytes, (12u << 20) + 4 * 4096);
    EXPECT_EQ(counts.zero_pages, (1u << 20) / 4096);
}

TEST(MultifdLanes, AHostileLaneFailsTheRoundAndWritesNothing) {
    Side src(true), dst(false);
    auto [sl, dl] = lane_pairs(2, src, dst);
    auto dest = make_dest_lanes(std::move(dl), dst.ctx.blocks);
    struct Case {
        Record record;
        const char* says;
    };
    Record past_end{RecordType::pages, 1, 1 << 20, 4096, 0};  // block 1 is 1 MiB long
    Record bad_block{RecordType::zero, 2, 0, 4096, 0};
    Record state{RecordType::state, 0, 0, 16, 0};
    Record other_round{RecordType::round_end, 0, 0, 0, 7};
    for (const Case& c : {Case{past_end, "multifd lane 1"}, Case{bad_block, "multifd lane 1"},
                          Case{state, "does not belong on a lane"}, Case{other_round, "end of round 7 inside round 0"}}) {
        auto [s, d] = lane_pairs(2, src, dst);
        auto lanes = make_dest_lanes(std::move(d), dst.ctx.blocks);
        auto bytes = encode_record(c.record);
        ASSERT_TRUE(s[1]->write(bytes) && s[1]->flush());
        Status served = lanes->serve_round(0);
        ASSERT_FALSE(served);
        EXPECT_NE(served.error().message().find(c.says), std::string::npos) << served.error().message();
    }
    std::vector<uint8_t> zero(1 << 20, 0);
    EXPECT_EQ(std::memcmp(dst.ram[1].data(), zero.data(), zero.size()), 0) << "a refused record wrote memory";
}

}  // namespace vmm::migration
