// A hostile destination against the source side of the protocol, on a real RDMA device (label
// rdma; run them in the SoftRoCE nested VM: scripts/softroce-run.sh ctest --test-dir build -L rdma).
//
// The source here is the plugin's own SourceSession, connecting and sending one chunk in one round;
// the destination is a rogue that accepts properly, exposes a 1 MiB buffer for remote write,
// and then answers what no honest destination would: RAM blocks that do not match, pin-all
// without an rkey, a chunk registered somewhere other than where its block was announced, a
// register result of the wrong size. The source must refuse each with a clear reason and write
// nothing; an honest answer, the control case, gets the chunk written.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/support/require.h"

#include "control_channel.h"
#include "rdma_test_support.h"
#include "source_session.h"

namespace rdma_migrate::test {
namespace need = ::vmm::need;  // VMM_REQUIRE(need::...)
namespace {

constexpr uint8_t kSourceFill = 0x3c;
// What the rogue grants besides pin-all: 64 KiB chunks, and ERROR with its reason.
constexpr uint32_t kGrant = kCapChunkSize | kCapErrorText | kCapBatch;

// The rogue: its "RAM" (filled with kFill) is registered whole for remote write, so any
// write the source is talked into lands there and shows.
struct RogueDestination {
    Ram target;
    std::unique_ptr<Endpoint> listener;
    std::unique_ptr<Endpoint> ep;
    std::unique_ptr<ControlChannel> ctl;
    MemoryRegion mr;
    uint16_t port = some_port();

    RogueDestination() {
        auto l = listen_endpoint(rdma_addr(), port, -1, kTimeouts);
        if (!l) throw std::runtime_error(l.error().message());
        listener = std::move(*l);
    }
    ~RogueDestination() {  // the HCA stops before any buffer goes
        if (ep) ep->hang_up();
    }
    // Accepts the source, granting the capabilities in `supported`, and answers its RAM
    // blocks request with `block`.
    void accept(uint32_t supported, const BlockDesc& block) {
        auto e = accept_endpoint(*listener, supported, ControlChannel::make_on(ctl));
        if (!e) throw std::runtime_error(e.error().message());
        ep = std::move(*e);
        mr.reset(ibv_reg_mr(ep->pd.get(), target.p, kRam, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
        if (!mr) throw std::runtime_error("ibv_reg_mr of the rogue's RAM failed");
        auto m = ctl->exchange_recv({Command::ram_blocks_request});
        if (!m) throw std::runtime_error(m.error().message());
        if (auto s = ctl->reply(encode_blocks({block})); !s) throw std::runtime_error(s.error().message());
    }
    BlockDesc honest() const { return {reinterpret_cast<uint64_t>(target.p), 0, kRam, 0}; }
    // Receives the source's REGISTER REQUEST and answers it with `results`.
    Result<std::vector<RegisterEntry>> answer_register(const std::vector<RegisterResult>& results) {
        auto m = ctl->exchange_recv({Command::register_request});
        if (!m) return m.error();
        auto ranges = decode_register_entries(*m);
        if (!ranges) return ranges.error();
        if (auto s = ctl->reply(encode_register_results(results)); !s) return s.error();
        return ranges;
    }
    // The source's next message: "READY", another type's name, or "the peer aborted: ...".
    std::string next() {
        auto m = ctl->answer(Command::ready);
        return m ? to_string(m->header.type) : m.error().message();
    }
};

// The plugin's source: connects to the rogue and sends chunk 0 in round 1, aborting (ERROR to
// the peer, as the plugin does) on any failure. result() is its error text, or "".
class Source {
public:
    Source(uint16_t port, bool pin_all) : ram_(kSourceFill) {
        SessionConfig cfg;
        cfg.blocks = {{"pc.ram", ram_.p, kRam, 0}};
        cfg.chunk_size = kChunk;
        cfg.pin_all = pin_all;
        cfg.timeouts = kTimeouts;
        migrating_.start([cfg, port]() -> std::string {
            auto s = SourceSession::connect(rdma_addr(), port, cfg);
            if (!s) return "connect: " + s.error().message();
            Status st = (*s)->ram_begin_round(1);
            if (st) st = (*s)->ram_send(0, 0, kChunk);
            if (st) st = (*s)->ram_end_round();
            if (!st) (*s)->link().abort(st.error().message());
            return st ? "" : st.error().message();
        });
    }
    std::string result() { return migrating_.result(); }

private:
    Ram ram_;
    PeerThread migrating_;  // after ram_: joined before the RAM goes
};

// The control case: honest answers, and chunk 0 arrives where it was registered.
TEST(RdmaSource, HonestDestinationGetsTheChunk) {
    VMM_REQUIRE(need::rdma());
    RogueDestination dst;
    Source src(dst.port, false);
    dst.accept(kGrant, dst.honest());
    auto asked = dst.answer_register({{dst.mr->rkey, reinterpret_cast<uint64_t>(dst.target.p)}});
    ASSERT_TRUE(asked) << asked.error().message();
    EXPECT_EQ(*asked, (std::vector<RegisterEntry>{{0, 0, 0}}));  // chunk 0's address in the block at offset 0
    auto done = dst.ctl->exchange_recv({Command::register_finished});
    EXPECT_TRUE(done) << done.error().message();
    EXPECT_EQ(src.result(), "");
    EXPECT_EQ(dst.target.changed(0, kChunk), kChunk);
    EXPECT_EQ(dst.target.changed(), kChunk);
}

TEST(RdmaSource, RamBlocksThatDoNotMatchAreRefused) {
    VMM_REQUIRE(need::rdma());
    RogueDestination dst;
    Source src(dst.port, false);
    BlockDesc bigger = dst.honest();
    bigger.length = 2 * kRam;
    dst.accept(kGrant, bigger);
    std::string why = src.result();
    EXPECT_NE(why.find(fmt::format("RAM block 0 ('pc.ram') is {} bytes here but {} on the peer", kRam, 2 * kRam)),
              std::string::npos)
        << why;
    EXPECT_NE(dst.next().find("the peer aborted: RAM block 0"), std::string::npos);
}

TEST(RdmaSource, PinAllGrantedWithoutAnRkeyIsRefused) {
    VMM_REQUIRE(need::rdma());
    RogueDestination dst;
    Source src(dst.port, true);
    dst.accept(kCapPinAll | kGrant, dst.honest());
    std::string why = src.result();
    EXPECT_NE(why.find("rdma-pin-all: the destination sent no rkey for 'pc.ram'"), std::string::npos) << why;
    EXPECT_EQ(dst.target.changed(), 0u);
}

// A registration answered with another block address than the one announced (here 2 chunks
// in, inside the rogue's registered buffer, where a write would succeed) is refused before any
// write.
TEST(RdmaSource, ChunkRegisteredAtAnotherAddressIsNeverWritten) {
    VMM_REQUIRE(need::rdma());
    RogueDestination dst;
    Source src(dst.port, false);
    dst.accept(kGrant, dst.honest());
    auto asked = dst.answer_register({{dst.mr->rkey, reinterpret_cast<uint64_t>(dst.target.p) + 2 * kChunk}});
    ASSERT_TRUE(asked) << asked.error().message();
    std::string why = src.result();
    EXPECT_NE(why.find("the destination registered a chunk of its block at 0x0 with the block at"), std::string::npos) << why;
    EXPECT_NE(why.find("not at " + fmt::format("{:#x}", reinterpret_cast<uint64_t>(dst.target.p)) + " as it announced"),
              std::string::npos) << why;
    EXPECT_EQ(dst.next().rfind("the peer aborted: the destination registered a chunk", 0), 0u);
    EXPECT_EQ(dst.target.changed(), 0u);
}

TEST(RdmaSource, RegisterResultOfTheWrongSizeIsRefused) {
    VMM_REQUIRE(need::rdma());
    RogueDestination dst;
    Source src(dst.port, false);
    dst.accept(kGrant, dst.honest());
    uint64_t at = reinterpret_cast<uint64_t>(dst.target.p);
    auto asked = dst.answer_register({{dst.mr->rkey, at}, {dst.mr->rkey, at + kChunk}});
    ASSERT_TRUE(asked) << asked.error().message();
    std::string why = src.result();
    EXPECT_NE(why.find("the destination answered a register request with the wrong count"), std::string::npos) << why;
    EXPECT_EQ(dst.target.changed(), 0u);
}

}  // namespace
}  // namespace rdma_migrate::test
