// A forger on the fabric against an authenticated RDMA migration (kCapTls), on a real RDMA
// device (label rdma; run them in the SoftRoCE nested VM: scripts/softroce-run.sh ctest -R
// RdmaForgery). The plugin's own source and destination migrate one chunk with tls-creds at
// both ends and rdma-pin-all; a second queue pair on the destination's protection domain (what
// a forger who has the rkey needs: its packets then land as the source's do) writes over one
// page after the source's write landed and before the source's sums arrive. The destination
// checks the sums as vmm does (RamVerifier, keyed with the session's exporter): the forged page
// is named by block and offset. The control case, without the forger, settles clean.
// Postcopy (RdmaPostcopyForgery): the source pushes one page into a landing slot, and the forger
// writes over that slot before the destination takes the write (its tag fails, named by block
// and offset, and nothing is handed on to be placed) or after (what is placed is the private
// copy the tag was checked on).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>

#include "control_channel.h"
#include "destination_session.h"
#include "rdma_test_support.h"
#include "source_session.h"
#include "tests/support/require.h"
#include "tests/support/test_pki.h"
#include "tests/support/wait.h"
#include "vmm/migration/transport/ram_verifier.h"

namespace rdma_migrate::test {
namespace need = ::vmm::need;  // VMM_REQUIRE(need::...)
namespace mig = ::vmm::migration;
namespace {

constexpr uint8_t kTlsSourceFill = 0x3c;
constexpr uint64_t kForgedPage = 3;  // the page of chunk 0 the forger writes over
constexpr uint64_t kPage = 4096;

std::optional<vmm::stream::TlsSetup> tls_setup(const std::string& dir) {
    vmm::stream::TlsSetup t;
    t.creds_dir = dir;
    t.hostname = rdma_addr();
    return t;
}

SessionConfig config(Ram& ram, const std::string& creds) {
    SessionConfig cfg;
    cfg.blocks = {{"pc.ram", ram.p, kRam, 0}};
    cfg.chunk_size = kChunk;
    cfg.pin_all = true;
    cfg.timeouts = kTimeouts;
    cfg.tls = tls_setup(creds);
    return cfg;
}

mig::PageSummer summer_of(const Connection& c) {
    auto k = c.sums_key(sizeof(mig::PageSumKey));
    if (!k) throw std::runtime_error(k.error().message());
    mig::PageSumKey key{};
    std::copy(k->begin(), k->end(), key.begin());
    return mig::PageSummer(key);
}

// The forger: an RC connection of its own whose far end is a QP on the destination's PD.
struct Forger {
    std::unique_ptr<Endpoint> listener, ours, hijacked;
    std::unique_ptr<ControlChannel> ctl;
    std::vector<uint8_t> page = std::vector<uint8_t>(kPage, 0xee);
    MemoryRegion mr;
    bool done = false;

    explicit Forger(ibv_pd* victim_pd) {
        uint16_t port = some_port();
        auto l = listen_endpoint(rdma_addr(), port, -1, kTimeouts);
        if (!l) throw std::runtime_error(l.error().message());
        listener = std::move(*l);
        auto far = std::async(std::launch::async, [&] {
            return connect_endpoint(rdma_addr(), port, PrivateData{}, -1, kTimeouts, [](Endpoint&) { return Status{}; },
                                    victim_pd);
        });
        auto e = accept_endpoint(*listener, 0, ControlChannel::make_on(ctl));
        auto h = far.get();
        if (!e || !h) throw std::runtime_error("the forger's connection: " + (e ? h.error() : e.error()).message());
        ours = std::move(*e);
        hijacked = std::move(*h);
        mr.reset(ibv_reg_mr(ours->pd.get(), page.data(), page.size(), IBV_ACCESS_LOCAL_WRITE));
        if (!mr) throw std::runtime_error("ibv_reg_mr of the forged page failed");
        ctl->on_other = [this](const ibv_wc&) {
            done = true;
            return Status{};
        };
    }
    ~Forger() {
        if (hijacked) hijacked->hang_up();
        if (ours) ours->hang_up();
    }
    Status write(uint64_t addr, uint32_t rkey) {
        int rc = post_one(ours->qp.get(), IBV_WR_RDMA_WRITE, page.data(), static_cast<uint32_t>(page.size()), mr->lkey, addr, rkey);
        if (rc != 0) return Error::from_errno("ibv_post_send", rc);
        return ctl->progress([this] { return done; });
    }
};

// One authenticated round of chunk 0; with `forge`, the forger writes page kForgedPage between
// the source's write and its sums. Returns what the destination's verifier settled with.
std::string migrate_one_chunk(const std::string& creds, bool forge) {
    Ram src_ram(kTlsSourceFill), dst_ram;
    uint16_t port = some_port();
    auto l = listen_endpoint(rdma_addr(), port, -1, kTimeouts);
    if (!l) return "listen: " + l.error().message();
    std::promise<DestinationSession*> accepted;
    std::promise<void> forger_gone;
    std::string settled;
    PeerThread destination;
    destination.start([&]() -> std::string {
        auto s = DestinationSession::accept(**l, config(dst_ram, creds), "", kAcceptWaitMs);
        if (!s) {
            accepted.set_value(nullptr);
            return "accept: " + s.error().message();
        }
        mig::RamVerifier verifier({{"pc.ram", 0, kRam}}, summer_of((*s)->link()));
        (*s)->on_sums([&](uint32_t block, uint64_t offset, std::span<const uint64_t> sums) -> Status {
            verifier.check(block, offset, {dst_ram.p + offset, sums.size() * kPage}, sums);
            return {};
        });
        accepted.set_value(s->get());
        Status round = (*s)->serve_round(1);
        Status clean = verifier.settle();
        settled = clean ? "" : clean.error().message();
        forger_gone.get_future().wait();  // its QP is on this session's PD
        return round ? "" : round.error().message();
    });
    auto s = SourceSession::connect(rdma_addr(), port, config(src_ram, creds));
    if (!s) return "connect: " + s.error().message();
    DestinationSession* dst = accepted.get_future().get();
    std::unique_ptr<Forger> forger;
    if (forge && dst != nullptr) forger = std::make_unique<Forger>(dst->link().channels().protection_domain());
    mig::PageSummer summer = summer_of((*s)->link());
    std::vector<uint64_t> sums;
    for (uint64_t p = 0; p < kChunk / kPage; ++p) sums.push_back(summer(src_ram.p + p * kPage));
    Status st = (*s)->ram_begin_round(1);
    if (st) st = (*s)->ram_sums(0, 0, sums);
    if (st) st = (*s)->ram_send(0, 0, kChunk);
    // The source's write has landed (its fill is there) before the forger writes over it.
    if (st && !vmm::test::eventually([&] { return dst_ram.changed(0, kChunk) == kChunk; }, 30)) st = Error("the chunk never landed");
    if (st && forger) st = forger->write(reinterpret_cast<uint64_t>(dst_ram.p) + kForgedPage * kPage, dst->link().pinned().rkey(0));
    if (st) st = (*s)->ram_end_round();
    forger.reset();
    forger_gone.set_value();
    std::string dst_result = destination.result();
    if (!st) return "source: " + st.error().message();
    if (!dst_result.empty()) return "destination: " + dst_result;
    return settled.empty() ? "clean" : settled;
}

enum class Forge { never, before_taken, after_taken };

struct PostcopyOutcome {
    std::string destination;  // "" when the write was taken, else why not
    bool arrived_whole = false;  // the page handed on holds the source's bytes (read after any forgery)
    bool slot_forged = false;    // the forger's bytes are in the landing slot
};

// One authenticated postcopy push of page kForgedPage, the forger writing over its landing
// slot as `forge` says.
PostcopyOutcome postcopy_one_page(const std::string& creds, Forge forge) {
    Ram src_ram(kTlsSourceFill), dst_ram;
    uint16_t port = some_port();
    auto l = listen_endpoint(rdma_addr(), port, -1, kTimeouts);
    if (!l) return {"listen: " + l.error().message()};
    std::promise<DestinationSession*> switched;
    std::promise<void> take, taken, forger_gone;
    PostcopyOutcome out;
    PeerThread destination;
    destination.start([&]() -> std::string {
        SessionConfig cfg = config(dst_ram, creds);
        cfg.pin_all = false, cfg.postcopy = true;
        auto s = DestinationSession::accept(**l, cfg, "", kAcceptWaitMs);
        Status st = s ? (*s)->begin_postcopy() : Status(s.error());
        switched.set_value(st ? s->get() : nullptr);
        if (!st) {
            taken.set_value();
            return st.error().message();
        }
        take.get_future().wait();
        auto a = (*s)->postcopy()->next();
        taken.set_value();
        forger_gone.get_future().wait();
        if (a && a->data != nullptr)
            out.arrived_whole = std::all_of(a->data, a->data + kPage, [](uint8_t b) { return b == kTlsSourceFill; });
        (*s)->link().abort("the test is over");
        return a ? "" : a.error().message();
    });
    SessionConfig cfg = config(src_ram, creds);
    cfg.pin_all = false, cfg.postcopy = true;
    auto s = SourceSession::connect(rdma_addr(), port, cfg);
    DestinationSession* dst = switched.get_future().get();
    Status st = !s ? Status(s.error()) : dst == nullptr || (*s)->postcopy() == nullptr ? Status(Error("no postcopy channel")) : Status{};
    if (st) st = (*s)->postcopy()->begin();
    std::unique_ptr<Forger> forger;
    if (st && forge != Forge::never) forger = std::make_unique<Forger>(dst->link().channels().protection_domain());
    if (st)
        if (auto sent = (*s)->postcopy()->send(0, kForgedPage * kPage, 1, false, {}, std::nullopt); !sent) st = sent.error();
    const uint8_t* slot = dst != nullptr && dst->postcopy() != nullptr
                              ? reinterpret_cast<const uint8_t*>(dst->postcopy()->landing_slot(kPcRequestSlots))
                              : nullptr;
    if (st && !vmm::test::eventually([&] { return slot[0] == kTlsSourceFill && slot[kPage - 1] == kTlsSourceFill; }, 30))
        st = Error("the push never landed");
    auto forge_now = [&] {
        if (st) st = forger->write(dst->postcopy()->landing_slot(kPcRequestSlots), dst->postcopy()->landing_rkey());
        out.slot_forged = st && slot[0] == 0xee;
    };
    if (forge == Forge::before_taken) forge_now();
    take.set_value();
    taken.get_future().wait();
    if (forge == Forge::after_taken) forge_now();
    forger.reset();
    forger_gone.set_value();
    out.destination = destination.result();
    if (!st) out.destination = "test: " + st.error().message();
    return out;
}

// kCapPostcopyRead on an authenticated channel: after the source's first push (and the KEYS
// before it, the region's page tags made), the destination reads page kForgedPage by RDMA READ
// beside its tag. With `forge` the page changes at the source after it was tagged: the bytes a
// forger answering the READ in the source's place would deliver. The tag then fails, naming the
// page, and nothing is handed on to be placed.
struct ReadOutcome {
    std::string destination;  // "" when the page was handed on, else why not
    uint64_t reads = 0;       // faults read by RDMA READ
    bool arrived_whole = false;
    bool fetched_here = false;  // fetch() returned the page (else next() did)
};

// `fetch`: the fault thread awaits its READ itself (fetch(), as vmm's fault thread does); a
// READ that outlasts its wait, or a failure there, then comes through next() as without it.
// `wait_us`: the destination's x-rdma-postcopy-read-wait.
ReadOutcome read_one_page(const std::string& creds, bool forge, bool fetch = false, uint32_t wait_us = 1000) {
    Ram src_ram(kTlsSourceFill), dst_ram;
    uint16_t port = some_port();
    auto l = listen_endpoint(rdma_addr(), port, -1, kTimeouts);
    if (!l) return {"listen: " + l.error().message()};
    std::promise<void> pushed;
    ReadOutcome out;
    PeerThread destination;
    auto reading = [&](Ram& ram) {
        SessionConfig cfg = config(ram, creds);
        cfg.pin_all = false, cfg.postcopy = true, cfg.postcopy_read = true;
        cfg.postcopy_read_wait_us = wait_us;
        return cfg;
    };
    destination.start([&]() -> std::string {
        auto s = DestinationSession::accept(**l, reading(dst_ram), "", kAcceptWaitMs);
        if (!s) return "accept: " + s.error().message();
        auto done = [&](std::string why) {
            (*s)->link().abort("the test is over");
            return why;
        };
        if (auto b = (*s)->begin_postcopy(); !b) return done("begin: " + b.error().message());
        PostcopyDestination* pc = (*s)->postcopy();
        auto push = pc->next();  // the KEYS are taken on the way to it
        if (!push) return done("push: " + push.error().message());
        if (auto r = pc->release(*push); !r) return done("release: " + r.error().message());
        pushed.get_future().wait();  // and the source has forged, or not
        if (!pc->readable(0, kForgedPage * kPage)) return done("no region told for the page");
        std::optional<PostcopyDestination::Arrival> fetched;
        if (!fetch) {
            if (auto r = pc->request(0, kForgedPage * kPage); !r) return done("request: " + r.error().message());
        } else if (auto f = pc->fetch(0, kForgedPage * kPage); f) {
            fetched = std::move(*f);
            out.fetched_here = fetched.has_value();
        } else {
            out.reads = pc->reads();
            auto after = pc->next();
            if (!after && after.error().message() == f.error().message()) return done(f.error().message());
            return done("fetch failed (" + f.error().message() + "), and the receiving thread did not fail with it: " +
                        (after ? "an arrival" : after.error().message()));
        }
        auto a = fetched ? Result<PostcopyDestination::Arrival>(std::move(*fetched)) : pc->next();
        out.reads = pc->reads();
        if (!a) return done(a.error().message());
        out.arrived_whole = a->data != nullptr && a->offset == kForgedPage * kPage &&
                            std::all_of(a->data, a->data + kPage, [](uint8_t b) { return b == kTlsSourceFill; });
        return done("");
    });
    auto s = SourceSession::connect(rdma_addr(), port, reading(src_ram));
    Status st = !s ? Status(s.error()) : (*s)->postcopy() == nullptr ? Status(Error("no postcopy channel")) : Status{};
    if (st) st = (*s)->postcopy()->begin();
    if (st)  // KEYS, tagged, go before it
        if (auto sent = (*s)->postcopy()->send(0, 0, 1, false, {}, std::nullopt); !sent) st = sent.error();
    if (st && forge) src_ram.p[kForgedPage * kPage + 100] ^= 0xff;
    pushed.set_value();
    out.destination = destination.result();
    if (!st) out.destination = "test: " + st.error().message();
    return out;
}

struct Pki {
    static const Pki& get() {
        static Pki pki;
        return pki;
    }
    vmm::test::TestPki dirs{"vmm-rdma-forgery"};
    std::string good = dirs.make("good", "--server " + rdma_addr());
};

}  // namespace

TEST(RdmaForgery, WithoutAForgerEveryPageMatchesItsMac) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    EXPECT_EQ(migrate_one_chunk(Pki::get().good, false), "clean");
}

TEST(RdmaForgery, APageWrittenByASecondQueuePairIsNamed) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    std::string result = migrate_one_chunk(Pki::get().good, true);
    EXPECT_NE(result.find("pc.ram"), std::string::npos) << result;
    EXPECT_NE(result.find("0x3000"), std::string::npos) << result;
}

}  // namespace rdma_migrate::test

namespace rdma_migrate::test {

TEST(RdmaPostcopyForgery, WithoutAForgerThePushedPageArrivesWhole) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    PostcopyOutcome out = postcopy_one_page(Pki::get().good, Forge::never);
    EXPECT_EQ(out.destination, "");
    EXPECT_TRUE(out.arrived_whole);
}

TEST(RdmaPostcopyForgery, ASlotWrittenOverBeforeItIsTakenFailsItsTagNamingTheRange) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    PostcopyOutcome out = postcopy_one_page(Pki::get().good, Forge::before_taken);
    EXPECT_TRUE(out.slot_forged) << out.destination;
    EXPECT_NE(out.destination.find("RAM block 'pc.ram' offset 0x3000"), std::string::npos) << out.destination;
    EXPECT_NE(out.destination.find("failed authentication"), std::string::npos) << out.destination;
}

TEST(RdmaPostcopyForgery, ASlotWrittenOverAfterItWasCheckedChangesNothingPlaced) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    PostcopyOutcome out = postcopy_one_page(Pki::get().good, Forge::after_taken);
    EXPECT_EQ(out.destination, "");
    EXPECT_TRUE(out.slot_forged) << "the forger's write did not land in the slot";
    EXPECT_TRUE(out.arrived_whole) << "the forged bytes reached what is placed";
}

}  // namespace rdma_migrate::test

namespace rdma_migrate::test {

namespace {
// What an honest READ and a forged one come to, whoever takes the READ.
void expect_placed_whole(const ReadOutcome& out) {
    EXPECT_EQ(out.destination, "");
    EXPECT_EQ(out.reads, 1u) << "the page was asked for, not read";
    EXPECT_TRUE(out.arrived_whole);
}
void expect_refused_naming_it(const ReadOutcome& out) {
    EXPECT_EQ(out.reads, 1u);
    EXPECT_NE(out.destination.find("the page read by RDMA READ from RAM block 'pc.ram' offset 0x3000 failed "
                                   "authentication"),
              std::string::npos)
        << out.destination;
    EXPECT_FALSE(out.arrived_whole);
}
}  // namespace

TEST(RdmaPostcopyReadForgery, AnAuthenticatedReadPlacesThePageItsTagVouchesFor) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    expect_placed_whole(read_one_page(Pki::get().good, false));
}

// The fault thread's own wait for its READ (fetch) checks the tag as the receiving thread does.
TEST(RdmaPostcopyReadForgery, AFetchedReadPlacesThePageItsTagVouchesFor) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    expect_placed_whole(read_one_page(Pki::get().good, false, true));
}

// A forged page fails the fetch, naming it, and the receiving thread, asleep on its CQs where
// nothing more comes, is woken to fail with the same reason.
TEST(RdmaPostcopyReadForgery, AFetchedPageThatIsNotWhatWasTaggedFailsTheFetchAndTheReceivingThread) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    expect_refused_naming_it(read_one_page(Pki::get().good, true, true));
}

// x-rdma-postcopy-read-wait 0: the fault thread posts its READ and returns at once; the
// receiving thread, woken by the completion, checks the page and hands it on.
TEST(RdmaPostcopyReadForgery, WithTheWaitOffTheReceivingThreadTakesTheFetchedRead) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    ReadOutcome out = read_one_page(Pki::get().good, false, true, 0);
    EXPECT_FALSE(out.fetched_here) << "the fault thread waited for its READ with x-rdma-postcopy-read-wait 0";
    expect_placed_whole(out);
}

TEST(RdmaPostcopyReadForgery, APageThatIsNotWhatWasTaggedIsRefusedNamingIt) {
    VMM_REQUIRE(need::rdma(), need::certtool());
    ASSERT_FALSE(Pki::get().good.empty());
    expect_refused_naming_it(read_one_page(Pki::get().good, true));
}

}  // namespace rdma_migrate::test
