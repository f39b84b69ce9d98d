// A hostile destination's RDMA READs against the source's postcopy channel (kCapPostcopyRead;
// label rdma, in the SoftRoCE nested VM). The source is the plugin's own SourceSession; the
// destination is the plugin's own DestinationSession until the source has told it a region
// (KEYS), and then plays the rogue on that channel's queue pair: it reads where no KEYS said, or
// with an rkey nobody gave it. The adapter refuses each (remote access error), nothing is read,
// and the source's RAM is as it was; an honest READ beside them reads exactly the source's page.
#include <gtest/gtest.h>

#include "tests/support/require.h"

#include "destination_session.h"
#include "postcopy_channel.h"
#include "rdma_test_support.h"
#include "source_session.h"

namespace rdma_migrate::test {
namespace need = ::vmm::need;  // VMM_REQUIRE(need::...)
namespace {

SessionConfig reading(Ram& ram) {
    SessionConfig cfg;
    cfg.blocks = {{"pc.ram", ram.p, kRam, 0}};
    cfg.timeouts = kTimeouts;
    cfg.postcopy = true;
    cfg.postcopy_read = true;
    return cfg;
}

// Both sides past the switch, the source's first push (and the KEYS before it) taken by the
// destination: from here the test posts its own READs on the destination's queue pair.
class ReadPair {
public:
    explicit ReadPair(uint8_t source_fill) : source_ram_(source_fill) {
        uint16_t port = some_port();
        auto l = listen_endpoint(rdma_addr(), port, -1, kTimeouts);
        if (!l) throw std::runtime_error(l.error().message());
        listener_ = std::move(*l);
        accepted_.start([this]() -> std::string {
            auto s = DestinationSession::accept(*listener_, reading(dest_ram_), "", kAcceptWaitMs);
            if (!s) return "accept: " + s.error().message();
            dst_ = std::move(*s);
            if (auto b = dst_->begin_postcopy(); !b) return "begin: " + b.error().message();
            auto a = dst_->postcopy()->next();  // the KEYS are taken on the way to the push
            return a ? "" : a.error().message();
        });
        auto s = SourceSession::connect(rdma_addr(), port, reading(source_ram_));
        if (!s) throw std::runtime_error("connect: " + s.error().message());
        src_ = std::move(*s);
        if (src_->postcopy() == nullptr) throw std::runtime_error("no postcopy channel agreed");
        if (auto b = src_->postcopy()->begin(); !b) throw std::runtime_error("source begin: " + b.error().message());
        if (auto p = src_->postcopy()->send(0, 0, 1, false, {}, std::nullopt); !p) throw std::runtime_error(p.error().message());
        std::string r = accepted_.result();
        if (!r.empty()) throw std::runtime_error("destination: " + r);
        Endpoint& ep = dst_->postcopy()->endpoint();
        buf_mr_.reset(ibv_reg_mr(ep.protection_domain(), buf_.data(), buf_.size(), IBV_ACCESS_LOCAL_WRITE));
        if (!buf_mr_) throw std::runtime_error("ibv_reg_mr of the rogue's buffer failed");
    }
    ~ReadPair() {
        if (dst_) dst_->link().abort("the test is over");
    }
    // One READ of a page from (address, rkey) on the destination's queue pair: "" when it was
    // read, else why it failed.
    std::string read(uint64_t address, uint32_t rkey) {
        Endpoint& ep = dst_->postcopy()->endpoint();
        std::fill(buf_.begin(), buf_.end(), 0);
        if (!post_one_send(ep.qp.get(), 7, IBV_WR_RDMA_READ, buf_.data(), static_cast<uint32_t>(kPcPage), buf_mr_->lkey,
                           "ibv_post_send", address, rkey))
            return "ibv_post_send failed";
        bool done = false;
        auto r = wait_cq(ep, false, [&](const ibv_wc& wc) {
            done = done || wc.wr_id == 7;  // earlier completions (HELLO's SEND) pass by
            return Status{};
        }, [&] { return done; });
        return r ? "" : r.error().message();
    }
    PostcopyDestination::Remote told(uint64_t offset) {
        auto r = dst_->postcopy()->readable(0, offset);
        if (!r) throw std::runtime_error("no region told for offset 0");
        return *r;
    }
    uint8_t first_byte_read() const { return buf_[0]; }
    // READs the destination's queue pair may have under way at once, as its adapter says.
    int reads_at_once() {
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        if (ibv_query_qp(dst_->postcopy()->endpoint().qp.get(), &attr, IBV_QP_MAX_QP_RD_ATOMIC, &init) != 0) return -1;
        return attr.max_rd_atomic;
    }
    Ram& source_ram() { return source_ram_; }

private:
    Ram source_ram_;
    Ram dest_ram_;
    std::unique_ptr<Endpoint> listener_;
    std::unique_ptr<DestinationSession> dst_;
    std::unique_ptr<SourceSession> src_;
    PeerThread accepted_;
    std::vector<uint8_t> buf_ = std::vector<uint8_t>(kPcPage);
    MemoryRegion buf_mr_;
};

}  // namespace

// The region the source told is read exactly; its RAM stays as it was. The channel was agreed
// with more than one READ under way at once (a fault's READ need not wait behind a readahead's).
TEST(RdmaPostcopyRead, AnHonestReadGetsTheSourcesPage) {
    VMM_REQUIRE(need::rdma());
    ReadPair pair(0x3c);
    EXPECT_GT(pair.reads_at_once(), 1);
    auto at = pair.told(5 * kPcPage);
    EXPECT_EQ(at.address, reinterpret_cast<uint64_t>(pair.source_ram().p) + 5 * kPcPage);
    EXPECT_EQ(pair.read(at.address, at.rkey), "");
    EXPECT_EQ(pair.first_byte_read(), 0x3c);
    EXPECT_EQ(pair.source_ram().changed(), 0u);
}

// A READ past the end of what KEYS told (the next page after guest RAM), and one with an rkey
// the source never gave: the source's adapter refuses both, nothing is read, its RAM is whole.
TEST(RdmaPostcopyRead, ReadsOutsideWhatTheSourceToldAreRefusedByItsAdapter) {
    VMM_REQUIRE(need::rdma());
    {
        ReadPair pair(0x3c);
        auto at = pair.told(0);
        std::string why = pair.read(at.address + kRam, at.rkey);
        EXPECT_NE(why.find("remote access error"), std::string::npos) << why;
        EXPECT_NE(pair.first_byte_read(), 0x3c);
        EXPECT_EQ(pair.source_ram().changed(), 0u);
    }
    {
        ReadPair pair(0x3c);
        auto at = pair.told(0);
        std::string why = pair.read(at.address, at.rkey ^ 0x5a5a00u);
        EXPECT_NE(why.find("remote access error"), std::string::npos) << why;
        EXPECT_NE(pair.first_byte_read(), 0x3c);
        EXPECT_EQ(pair.source_ram().changed(), 0u);
    }
}

}  // namespace rdma_migrate::test
