// A hostile source against the destination side of the protocol, on a real RDMA device (label
// rdma; run them in the SoftRoCE nested VM: scripts/softroce-run.sh ctest --test-dir build -L rdma).
//
// The destination here is the plugin's own DestinationSession, serving a RAM round over a 1 MiB buffer
// that stands for guest RAM; the source is a rogue that connects properly and then sends what
// no honest source would: entries outside the RAM blocks, a valid entry followed by an invalid
// one, a message larger than the posted receive, RDMA WRITEs past the chunk it was granted or
// into one it gave back. The security rules, checked where the HCA enforces them:
// anything invalid ends the round with ERROR to the source, and nothing is written. Two tests
// more check how the destination ends a round that went well: after the source hangs up,
// unless its vmm is ending.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "control_channel.h"
#include "rdma_test_support.h"
#include "tests/support/require.h"
#include "tests/support/wait.h"
#include "destination_session.h"
#include "vmm/common/fd.h"

namespace rdma_migrate::test {
namespace need = ::vmm::need;  // VMM_REQUIRE(need::...)
namespace {

// The destination: listens, accepts one source, serves one round; `result` is its error text,
// or "" when the round ended with REGISTER FINISHED. `cancel_fd` stands for its vmm ending.
class Destination {
public:
    explicit Destination(Ram& ram, int cancel_fd = -1, Timeouts timeouts = kTimeouts) : port_(some_port()) {
        auto l = listen_endpoint(rdma_addr(), port_, cancel_fd, timeouts);
        if (!l) throw std::runtime_error(l.error().message());
        listener_ = std::move(*l);
        SessionConfig cfg;
        cfg.blocks = {{"pc.ram", ram.p, kRam, 0}};
        cfg.timeouts = timeouts;
        cfg.cancel_fd = cancel_fd;
        serving_.start([this, cfg]() -> std::string {
            auto s = DestinationSession::accept(*listener_, cfg, "", kAcceptWaitMs);
            if (!s) return "accept: " + s.error().message();
            Status round = (*s)->serve_round(1);
            served_ = true;  // the DestinationSession ends next
            return round ? "" : round.error().message();
        });
    }
    uint16_t port() const { return port_; }
    // Whether the round is over (the DestinationSession then ends, hanging up as it does).
    bool served() const { return served_; }
    // What the destination's round ended with (waits for it).
    std::string result() { return serving_.result(); }
    // Whether the round has ended within `seconds`.
    bool ends_within(int seconds) {
        return vmm::test::eventually([this] { return served_.load(); }, seconds);
    }

private:
    uint16_t port_;
    std::unique_ptr<Endpoint> listener_;
    std::atomic<bool> served_{false};
    PeerThread serving_;  // last: joined before the listener goes
};

// The rogue source: a proper connection and block exchange, then whatever the test sends.
struct Rogue {
    std::unique_ptr<Endpoint> ep;        // declared first: destroyed after the buffers' MRs
    std::unique_ptr<ControlChannel> ctl;
    std::vector<BlockDesc> blocks;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kControlBufferSize + 64 * 1024, 0x5a);
    MemoryRegion buf_mr;
    bool write_done = false;

    explicit Rogue(uint16_t port) {
        PrivateData ours;
        ours.flags = kCapChunkSize | kCapErrorText | kCapBatch;
        ours.chunk_shift = kChunkShift;
        auto e = connect_endpoint(rdma_addr(), port, ours, -1, kTimeouts, ControlChannel::make_on(ctl));
        if (!e) throw std::runtime_error(e.error().message());
        ep = std::move(*e);
        ctl->on_other = [this](const ibv_wc&) {
            write_done = true;
            return Status{};
        };
        auto m = ctl->request(encode_empty(Command::ram_blocks_request), Command::ram_blocks_result);
        if (!m) throw std::runtime_error(m.error().message());
        auto b = decode_blocks(*m);
        if (!b) throw std::runtime_error(b.error().message());
        blocks = *b;
        buf_mr.reset(ibv_reg_mr(ep->pd.get(), buf.data(), buf.size(), 0));
        if (!buf_mr) throw std::runtime_error("ibv_reg_mr of the rogue's buffer failed");
    }
    ~Rogue() { ep->hang_up(); }  // the HCA stops before any buffer goes, as in a Connection

    // The destination's next message; its ERROR comes back as "the peer aborted: ...".
    std::string next() {
        auto m = ctl->answer(Command::ready);
        return m ? std::string("READY") : m.error().message();
    }
    Result<RegisterResult> register_chunk(uint64_t chunk) {
        auto m = ctl->request(encode_register_entries(Command::register_request, {{chunk * kChunk, 0, 0}}),
                              Command::register_result);
        if (!m) return m.error();
        auto r = decode_register_results(*m);
        if (!r) return r.error();
        return r->at(0);
    }
    // Posts one signalled work request of `len` bytes of buf: an RDMA WRITE to (addr, rkey) or
    // a SEND. Returns ibv_post_send's result; done() waits for its completion.
    int post(ibv_wr_opcode op, uint32_t len, uint64_t addr = 0, uint32_t rkey = 0) {
        write_done = false;
        return post_one(ep->qp.get(), op, buf.data(), len, buf_mr->lkey, addr, rkey);
    }
    Status done() { return ctl->progress([this] { return write_done; }); }
    // One RDMA WRITE of `len` bytes to (addr, rkey); its completion status.
    Status write(uint64_t addr, uint32_t rkey, uint32_t len) {
        if (int rc = post(IBV_WR_RDMA_WRITE, len, addr, rkey); rc != 0) return Error::from_errno("ibv_post_send", rc);
        return done();
    }
};

struct Hostile {
    const char* name;
    std::vector<uint8_t> message;
    const char* reason;  // in the destination's ERROR
};

std::vector<Hostile> hostile_messages() {
    const uint64_t huge = 1ull << 63;
    return {
        {"RegisterNamesAnotherBlock", encode_register_entries(Command::register_request, {{0, 3, 0}}),
         "RDMA REGISTER REQUEST names RAM block 3 (there are 1)"},
        {"RegisterPastTheBlock", encode_register_entries(Command::register_request, {{16 * kChunk, 0, 0}}),
         "RDMA REGISTER REQUEST address 0x1000000 is outside 'pc.ram' (0x0+0x1000000)"},  // 16 chunks of 1 MiB
        {"RegisterCountOverflows", encode_register_entries(Command::register_request, {{2 * kChunk, 0, huge}}),
         "which has 16"},
        {"ValidRegisterThenInvalidOne", encode_register_entries(Command::register_request, {{kChunk, 0, 0}, {99 * kChunk, 0, 0}}),
         "is outside 'pc.ram'"},
        {"UnregisterPastTheBlock", encode_register_entries(Command::unregister_request, {{17, 0, 0}}),
         "names chunk 17 of 'pc.ram', which has 16"},
        {"CompressPastTheBlock", encode_compress({{0, 0, kRam - 4096, 8192}}), "is not whole pages inside 'pc.ram'"},
        {"CompressLengthWrapsAround", encode_compress({{0, 0, 4096, ~0ull - 4095}}), "is not whole pages inside"},
        {"CompressUnaligned", encode_compress({{0, 0, 100, 4096}}), "is not whole pages inside"},
        {"ValidCompressThenInvalidOne", encode_compress({{0, 0, 0, kRam / 2}, {0, 1, 0, 4096}}),
         "COMPRESS names RAM block 1"},
        {"SecondRamBlocksRequest", encode_empty(Command::ram_blocks_request), "a second RAM BLOCKS REQUEST"},
        {"MessageOfAnotherPhase", encode_empty(Command::unregister_finished), "unexpected UNREGISTER FINISHED"},
    };
}

// Test names print as the case's name, not as bytes.
void PrintTo(const Hostile& h, std::ostream* os) { *os << h.name; }

class HostileMessage : public ::testing::TestWithParam<Hostile> {};

// Each message is refused: the round ends with ERROR naming what was wrong, and no byte of
// RAM changes (a valid first entry is not carried out either).
TEST_P(HostileMessage, IsRefusedAndWritesNothing) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    Destination dst(ram);
    Rogue rogue(dst.port());
    ASSERT_TRUE(rogue.ctl->exchange_send(GetParam().message));
    std::string told = rogue.next();
    EXPECT_EQ(told.rfind("the peer aborted: ", 0), 0u) << told;
    EXPECT_NE(told.find(GetParam().reason), std::string::npos) << told;
    std::string why = dst.result();
    EXPECT_NE(why.find(GetParam().reason), std::string::npos) << why;
    EXPECT_EQ(ram.changed(), 0u);
}

INSTANTIATE_TEST_SUITE_P(RdmaDestination, HostileMessage, ::testing::ValuesIn(hostile_messages()),
                         [](const auto& p) { return std::string(p.param.name); });

// The destination registers exactly the chunk asked for: a write inside it lands, one that
// runs past its end is refused by the HCA, and the next chunk stays as it was.
TEST(RdmaDestination, RemoteWriteReachesOnlyTheRegisteredChunk) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    Destination dst(ram);
    Rogue rogue(dst.port());
    auto reg = rogue.register_chunk(2);
    ASSERT_TRUE(reg) << reg.error().message();
    EXPECT_EQ(reg->host_addr, rogue.blocks[0].host_addr);  // the block's start, as QEMU answers
    ASSERT_TRUE(rogue.write(reg->host_addr + 2 * kChunk, reg->rkey, 4096));
    EXPECT_EQ(ram.changed(2 * kChunk, 2 * kChunk + 4096), 4096u);
    EXPECT_EQ(ram.changed(), 4096u);

    Status past = rogue.write(reg->host_addr + 3 * kChunk - 4096, reg->rkey, 8192);
    ASSERT_FALSE(past) << "a write past the registered chunk completed";
    EXPECT_NE(past.error().message().find("a work request failed"), std::string::npos) << past.error().message();
    EXPECT_EQ(ram.changed(3 * kChunk, kRam), 0u) << "the write reached past the registered chunk";
    // The destination's adapter ended the connection; the destination says why, before the
    // rogue has even hung up.
    std::string why = dst.result();
    EXPECT_NE(why.find("the source wrote where it was not allowed (remote access error)"), std::string::npos) << why;
}

// After UNREGISTER FINISHED, the chunk's rkey opens nothing.
TEST(RdmaDestination, UnregisteredChunkTakesNoMoreWrites) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    Destination dst(ram);
    Rogue rogue(dst.port());
    auto reg = rogue.register_chunk(5);
    ASSERT_TRUE(reg) << reg.error().message();
    auto done = rogue.ctl->request(encode_register_entries(Command::unregister_request, {{5, 0, 0}}), Command::unregister_finished);
    ASSERT_TRUE(done) << done.error().message();
    Status late = rogue.write(reg->host_addr + 5 * kChunk, reg->rkey, 4096);
    EXPECT_FALSE(late) << "a write into an unregistered chunk completed";
    EXPECT_EQ(ram.changed(), 0u);
    std::string why = dst.result();
    EXPECT_NE(why.find("the source wrote where it was not allowed (remote access error)"), std::string::npos) << why;
}

// A SEND longer than the posted receive buffer fails at the destination's HCA: the round ends,
// nothing is written.
TEST(RdmaDestination, MessageLargerThanTheReceiveBufferEndsTheRound) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    Destination dst(ram);
    Rogue rogue(dst.port());
    ASSERT_EQ(rogue.next(), "READY");
    std::vector<uint8_t> head = encode_compress({{0, 0, 0, kRam}});
    std::memcpy(rogue.buf.data(), head.data(), head.size());
    ASSERT_EQ(rogue.post(IBV_WR_SEND, static_cast<uint32_t>(rogue.buf.size())), 0);
    (void)rogue.done();  // fails, or completes before the NAK
    // SoftRoCE reports the overflowing receive as "local QP operation error".
    std::string why = dst.result();
    EXPECT_NE(why.find("a work request failed"), std::string::npos) << why;
    EXPECT_EQ(ram.changed(), 0u);
}

// A source that goes silent mid-round with both of its receives used (the destination's answer
// and READY sit in them, unread): the destination gives up after one x-io-timeout. Its ERROR
// then finds no receive posted and would be retried for ever (RNR), so it is given a second at
// most: one timeout ends the round, not two.
TEST(RdmaDestination, ASilentSourceEndsTheRoundAfterOneTimeout) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    constexpr int kIoMs = 4000;
    Destination dst(ram, -1, Timeouts{10000, kIoMs});
    Rogue rogue(dst.port());
    ASSERT_TRUE(rogue.ctl->exchange_send(encode_register_entries(Command::register_request, {{0, 0, 0}})));
    // Silent from here: the REGISTER RESULT and the next READY fill the rogue's receives.
    EXPECT_TRUE(dst.ends_within(3 * kIoMs / 2 / 1000)) << "the destination took two timeouts or more";
    std::string why = dst.result();
    EXPECT_NE(why.find("was silent for 4000 ms"), std::string::npos) << why;
}

// Not hostile: how a destination ends a round that went well. The source counts its last
// message (the go-ahead, in a migration) delivered only once the message's completion says
// so; a destination that hung up at once could flush it on the source first, and the source
// would then resume a guest the destination runs. So the destination waits for the source to
// hang up first. Its DestinationSession ends here right after REGISTER FINISHED.
TEST(RdmaDestination, HangsUpOnlyAfterTheSourceAtTheEndOfAGoodRound) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    Destination dst(ram);
    Rogue rogue(dst.port());
    ASSERT_TRUE(rogue.ctl->exchange_send(encode_empty(Command::register_finished)));
    pollfd p{rogue.ep->events->fd, POLLIN, 0};
    if (::poll(&p, 1, 3000) != 0) {
        rdma_cm_event* ev = nullptr;
        std::string what = rdma_get_cm_event(rogue.ep->events.get(), &ev) == 0 ? rdma_event_str(ev->event) : "an event";
        if (ev) rdma_ack_cm_event(ev);
        ADD_FAILURE() << "the destination did not wait for the source to hang up: " << what;
    }
    rogue.ep->hang_up();
    EXPECT_EQ(dst.result(), "");
}

// ... but a destination whose vmm is ending (its cancel fd fires) does not wait for the source.
TEST(RdmaDestination, StopsWaitingForTheSourceWhenItsVmmEnds) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    vmm::UniqueFd cancel(::eventfd(0, EFD_CLOEXEC));
    ASSERT_TRUE(cancel.valid());
    Destination dst(ram, cancel.get());
    Rogue rogue(dst.port());
    ASSERT_TRUE(rogue.ctl->exchange_send(encode_empty(Command::register_finished)));
    ASSERT_TRUE(vmm::test::eventually([&] { return dst.served(); }, 30));
    uint64_t one = 1;
    ASSERT_EQ(::write(cancel.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
    pollfd p{rogue.ep->events->fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 5000), 1) << "the destination still waited for the source after its cancel";
    EXPECT_EQ(dst.result(), "");
}

}  // namespace
}  // namespace rdma_migrate::test
