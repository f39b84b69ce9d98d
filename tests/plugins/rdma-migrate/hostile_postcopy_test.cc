// A hostile source against the destination's postcopy channel, on a real RDMA device (label
// rdma; in the SoftRoCE nested VM). The destination is the plugin's own DestinationSession with
// postcopy granted, past its switch (begin_postcopy: landing slots registered, HELLO sent); the
// rogue connects properly, reads HELLO, and then writes into the landing slots what no honest
// source would. Each write is refused before vmm would place anything: the arrival names the
// reason, and what an honest write carries comes through checked.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "tests/support/require.h"

#include "postcopy_channel.h"
#include "rdma_test_support.h"
#include "destination_session.h"

namespace rdma_migrate::test {
namespace need = ::vmm::need;  // VMM_REQUIRE(need::...)
namespace {

// The destination: accepts one source with postcopy granted, switches, and takes one arrival;
// `result` is "" and `arrival` filled when it was accepted, else the reason it was refused.
class DestinationUnderTest {
public:
    // `reads`: x-rdma-postcopy-read on (granted when the rogue offers it).
    explicit DestinationUnderTest(Ram& ram, bool reads = false) : port_(some_port()) {
        auto l = listen_endpoint(rdma_addr(), port_, -1, kTimeouts);
        if (!l) throw std::runtime_error(l.error().message());
        listener_ = std::move(*l);
        SessionConfig cfg;
        cfg.blocks = {{"pc.ram", ram.p, kRam, 0}};
        cfg.timeouts = kTimeouts;
        cfg.postcopy = true;
        cfg.postcopy_read = reads;
        serving_.start([this, cfg]() -> std::string {
            auto s = DestinationSession::accept(*listener_, cfg, "", kAcceptWaitMs);
            if (!s) return "accept: " + s.error().message();
            if (auto b = (*s)->begin_postcopy(); !b) return "begin: " + b.error().message();
            auto a = (*s)->postcopy()->next();
            // Ends at once (vmm tells a failed migration's peer so), not after waiting for the rogue to hang up.
            (*s)->link().abort(a ? "the test is over" : a.error().message());
            if (!a) return a.error().message();
            arrival = *a;
            if (a->data != nullptr) first_byte = a->data[0];  // the slot goes with the session
            arrival.data = nullptr;
            return "";
        });
    }
    uint16_t port() const { return port_; }
    std::string result() { return serving_.result(); }
    PostcopyDestination::Arrival arrival;  // its data pointer cleared: the slots are gone with the session
    int first_byte = -1;                   // of the data, read while the slot was there

private:
    uint16_t port_;
    std::unique_ptr<Endpoint> listener_;
    PeerThread serving_;
};

// The rogue source: channel 0, then the postcopy channel, then HELLO; then whatever it writes.
struct PostcopyRogue {
    std::unique_ptr<Endpoint> ctl_ep, ep;  // first: destroyed after the buffers' MRs
    std::unique_ptr<ControlChannel> ctl;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kPcSlotSize, 0x5a);
    MemoryRegion buf_mr;
    PcMessage hello;

    // `reads`: offers kCapPostcopyRead; `pulls`: kCapPostcopyReadPush too.
    explicit PostcopyRogue(uint16_t port, bool reads = false, bool pulls = false) {
        PrivateData ours;
        ours.flags = kCapChannels | kCapPostcopy | kCapErrorText | (reads ? kCapPostcopyRead : 0u) |
                     (pulls ? kCapPostcopyReadPush : 0u);
        ours.channels = 2;
        ours.session = 0x5eed;
        auto e = connect_endpoint(rdma_addr(), port, ours, -1, kTimeouts, ControlChannel::make_on(ctl));
        if (!e) throw std::runtime_error(e.error().message());
        ctl_ep = std::move(*e);
        if ((ctl_ep->peer.flags & kCapPostcopy) == 0) throw std::runtime_error("the destination did not grant postcopy");
        ours.channel = 1;
        auto p = connect_endpoint(rdma_addr(), port, ours, -1, kTimeouts, [this](Endpoint& pe) {
            buf_mr.reset(ibv_reg_mr(pe.protection_domain(), buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE));
            if (!buf_mr) return Status(Error("ibv_reg_mr of the rogue's buffer failed"));
            ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), static_cast<uint32_t>(kPcMessageSize), buf_mr->lkey};
            ibv_recv_wr wr{};
            wr.sg_list = &sge;
            wr.num_sge = 1;
            ibv_recv_wr* bad = nullptr;
            return posted(ibv_post_recv(pe.qp.get(), &wr, &bad), "ibv_post_recv");
        }, ctl_ep->protection_domain(), QpShape{true, 8});
        if (!p) throw std::runtime_error(p.error().message());
        ep = std::move(*p);
        uint32_t len = 0;
        auto got = wait_cq(*ep, true, [&](const ibv_wc& wc) {
            len = wc.byte_len;
            return Status{};
        }, [&] { return len != 0; });
        if (!got) throw std::runtime_error(got.error().message());
        auto m = decode_pc_message({buf.data(), len});
        if (!m || m->type != PcType::hello) throw std::runtime_error("no HELLO from the destination");
        hello = *m;
    }
    ~PostcopyRogue() {
        ep->hang_up();
        ctl_ep->hang_up();
    }

    // One RDMA WRITE WITH IMMEDIATE of `bytes` (a trailer, after `data_pages` pages of 0x5a)
    // into `slot`, with the immediate `imm`.
    Status write(uint32_t slot, uint32_t imm, uint32_t data_pages, const std::vector<uint8_t>& bytes) {
        std::memset(buf.data(), 0x5a, data_pages * kPcPage);  // HELLO was received into its start
        std::memcpy(buf.data() + data_pages * kPcPage, bytes.data(), bytes.size());
        ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), static_cast<uint32_t>(data_pages * kPcPage + bytes.size()),
                    buf_mr->lkey};
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = htonl(imm);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.wr.rdma.remote_addr = hello.landing + uint64_t{slot} * kPcSlotSize;
        wr.wr.rdma.rkey = hello.rkey;
        ibv_send_wr* bad = nullptr;
        if (auto s = posted(ibv_post_send(ep->qp.get(), &wr, &bad), "ibv_post_send"); !s) return s;
        bool done = false;
        auto r = wait_cq(*ep, false, [&](const ibv_wc&) {
            done = true;
            return Status{};
        }, [&] { return done; });
        return r ? Status{} : Status(r.error());
    }
    uint32_t push_slot(uint32_t i = 0) const { return hello.request_slots + i; }
};

struct HostileWrite {
    const char* name;
    bool push;            // into the first push slot, else request slot 0 (which asks for nothing)
    PcKind kind;
    uint32_t pages;       // in the immediate
    PcTrailer trailer;
    const char* reason;
};

std::vector<HostileWrite> hostile_writes() {
    return {
        {"PagesPastTheBlock", true, PcKind::data, 1, {0, 1, 0, kRam, {}}, "fall outside RAM block 'pc.ram'"},
        {"RunOverflowsTheBlock", true, PcKind::zero, 16, {0, 16, 0, kRam - 4 * kPcPage, {}}, "fall outside RAM block"},
        {"AnotherBlock", true, PcKind::data, 1, {3, 1, 0, 0, {}}, "block 3 does not exist"},
        {"UnalignedOffset", true, PcKind::data, 1, {0, 1, 0, 100, {}}, "whole pages"},
        {"TrailerDisagreesWithTheImmediate", true, PcKind::data, 2, {0, 1, 0, 0, {}}, "whose trailer says 1"},
        {"UnknownTrailerFlag", true, PcKind::zero, 1, {0, 1, 8, 0, {}}, "trailer flags"},
        {"AnswerNobodyAskedFor", false, PcKind::data, 1, {0, 1, 0, 0, {}}, "which it does not ask for"},
    };
}

void PrintTo(const HostileWrite& h, std::ostream* os) { *os << h.name; }

class HostilePostcopyWrite : public ::testing::TestWithParam<HostileWrite> {};

// Each write is refused with its reason before anything could be placed, and guest RAM is as it was.
TEST_P(HostilePostcopyWrite, IsRefusedBeforeAnythingIsPlaced) {
    VMM_REQUIRE(need::rdma());
    const HostileWrite& h = GetParam();
    Ram ram;
    DestinationUnderTest dst(ram);
    PostcopyRogue rogue(dst.port());
    uint32_t slot = h.push ? rogue.push_slot() : 0;
    uint32_t imm = encode_pc_immediate({h.kind, static_cast<uint16_t>(slot), static_cast<uint8_t>(h.pages)});
    ASSERT_TRUE(rogue.write(slot, imm, h.kind == PcKind::data ? h.pages : 0, encode_pc_trailer(h.trailer)));
    std::string why = dst.result();
    EXPECT_NE(why.find(h.reason), std::string::npos) << why;
    EXPECT_EQ(ram.changed(), 0u);
}

INSTANTIATE_TEST_SUITE_P(RdmaPostcopy, HostilePostcopyWrite, ::testing::ValuesIn(hostile_writes()),
                         [](const auto& p) { return std::string(p.param.name); });

// Raw immediates no honest source sends: an unknown kind, a slot past the landing area, END
// with fields. Each lands in the first push slot and is refused by what its immediate says.
TEST(RdmaPostcopyDestination, ImmediatesOutsideTheProtocolAreRefused) {
    VMM_REQUIRE(need::rdma());
    const std::pair<uint32_t, const char*> cases[] = {
        {0x09000001u, "unknown kind 9"},
        {encode_pc_immediate({PcKind::data, 4000, 1}), "a write into slot 4000"},
        {encode_pc_immediate({PcKind::end, 3, 0}), "END immediate"},
    };
    for (const auto& [imm, reason] : cases) {
        Ram ram;
        DestinationUnderTest dst(ram);
        PostcopyRogue rogue(dst.port());
        ASSERT_TRUE(rogue.write(rogue.push_slot(), imm, 1, encode_pc_trailer({0, 1, 0, 0, {}})));
        std::string why = dst.result();
        EXPECT_NE(why.find(reason), std::string::npos) << why;
        EXPECT_EQ(ram.changed(), 0u);
    }
}

// A destination with READ on (`reads`), and a rogue that offers it and the push read (`pulls`),
// which writes one KEYS or PULL
// (`kind`, one entry: `bytes`) into the push ring: the destination refuses it for `reason`,
// and nothing of guest RAM changes.
void expect_listing_refused(bool reads, bool pulls, PcKind kind, const std::vector<uint8_t>& bytes, const char* reason) {
    Ram ram;
    DestinationUnderTest dst(ram, reads);
    PostcopyRogue rogue(dst.port(), reads, pulls);
    uint32_t slot = rogue.push_slot();
    ASSERT_TRUE(rogue.write(slot, encode_pc_immediate({kind, static_cast<uint16_t>(slot), 1}), 0, bytes));
    std::string why = dst.result();
    EXPECT_NE(why.find(reason), std::string::npos) << why;
    EXPECT_EQ(ram.changed(), 0u);
}

// KEYS (kCapPostcopyRead) no honest source writes: regions outside guest RAM, not whole pages,
// or KEYS on a channel that did not agree to READ. Each is refused before any region is kept,
// so no READ could be aimed by it.
TEST(RdmaPostcopyDestination, KeysOutsideTheProtocolAreRefused) {
    VMM_REQUIRE(need::rdma());
    struct Case {
        bool reads;
        PcRegion region;
        const char* reason;
    };
    const Case cases[] = {
        {true, {0, 7, 0, kRam + kPcPage, 0x7f0000000000}, "fall outside RAM block 'pc.ram'"},
        {true, {1, 7, 0, kPcPage, 0x7f0000000000}, "block 1 does not exist"},
        {true, {0, 7, 0, 100, 0x7f0000000000}, "not whole, aligned pages"},
        {false, {0, 7, 0, kPcPage, 0x7f0000000000}, "did not agree to RDMA READ"},
    };
    for (const Case& c : cases) {
        PcRegion one[] = {c.region};
        expect_listing_refused(c.reads, false, PcKind::keys, encode_pc_regions(one), c.reason);
    }
}

// PULL (kCapPostcopyReadPush) no honest source writes: runs in no region a KEYS told, outside
// guest RAM, not whole pages, or PULL on a channel that did not agree to it. Each is refused
// before any READ is aimed by it.
TEST(RdmaPostcopyDestination, PullsOutsideTheProtocolAreRefused) {
    VMM_REQUIRE(need::rdma());
    struct Case {
        bool pulls;
        PcPullRun run;
        const char* reason;
    };
    const Case cases[] = {
        {true, {0, 1, 0}, "lies in no region a KEYS told"},
        {true, {0, 2, kRam - kPcPage}, "fall outside RAM block 'pc.ram'"},
        {true, {1, 1, 0}, "block 1 does not exist"},
        {true, {0, 1, 100}, "is not 1 to"},
        {false, {0, 1, 0}, "did not agree to the destination reading its push"},
    };
    for (const Case& c : cases) expect_listing_refused(true, c.pulls, PcKind::pull, encode_pc_pulls({0, {c.run}}), c.reason);
}

// An honest push goes through, checked: its pages are where the trailer says, with their sums.
TEST(RdmaPostcopyDestination, AnHonestPushArrivesChecked) {
    VMM_REQUIRE(need::rdma());
    Ram ram;
    DestinationUnderTest dst(ram);
    PostcopyRogue rogue(dst.port());
    uint32_t slot = rogue.push_slot();
    PcTrailer t{0, 2, kPcSummed, 4 * kPcPage, {11, 22}};
    ASSERT_TRUE(rogue.write(slot, encode_pc_immediate({PcKind::data, static_cast<uint16_t>(slot), 2}), 2, encode_pc_trailer(t)));
    ASSERT_EQ(dst.result(), "");
    EXPECT_EQ(dst.arrival.kind, PcKind::data);
    EXPECT_EQ(dst.arrival.offset, 4 * kPcPage);
    EXPECT_EQ(dst.arrival.pages, 2u);
    EXPECT_EQ(dst.arrival.sums, (std::vector<uint64_t>{11, 22}));
    EXPECT_EQ(dst.first_byte, 0x5a);
    EXPECT_EQ(ram.changed(), 0u);  // placing is vmm's, with UFFDIO_COPY: the adapter never wrote guest RAM
}

}  // namespace
}  // namespace rdma_migrate::test
