// A pull server (PullServer) against honest and hostile clients, in one process (label rdma, in
// the SoftRoCE nested VM): honest clients read exactly what is served, any range, several at
// once, and the server counts what each read and sees each say DONE; a client that READs past
// what is served, or with another server's rkey, is refused by the adapter (nothing read, its
// connection ends) and one that sends the server garbage is cut off with a line naming it,
// while another client pulls on unharmed and what is served is as it was; a migration source
// that reaches a server is refused, in words.
#include <gtest/gtest.h>

#include <thread>

#include "tests/support/require.h"

#include "pull_client.h"
#include "pull_server.h"
#include "rdma_test_support.h"

namespace rdma_migrate::test {
namespace need = ::vmm::need;  // VMM_REQUIRE(need::...)
namespace {

// kRam of a pattern no two pages share: a read from the wrong place shows.
struct Served {
    Served() {
        for (uint64_t i = 0; i < kRam / 8; ++i) {
            uint64_t v = i * 0x9e3779b97f4a7c15ull;
            std::memcpy(ram.p + i * 8, &v, 8);
        }
    }
    Ram ram;
};

struct PullSetup {
    Served served;
    uint16_t port = some_port();
    std::unique_ptr<PullServer> server;
    PullSetup() {
        auto s = PullServer::start(rdma_addr(), port, served.ram.p, kRam, kTimeouts);
        if (!s) throw std::runtime_error(s.error().message());
        server = std::move(*s);
    }
    std::unique_ptr<PullClient> client() {
        auto c = PullClient::open(rdma_addr(), port, -1, kTimeouts);
        if (!c) throw std::runtime_error(c.error().message());
        return std::move(*c);
    }
    // Waits (up to 10 s) until the server lists `n` clients in `state`.
    bool eventually_in(PullServer::Client::State state, size_t n) {
        for (int i = 0; i < 200; ++i) {
            auto cs = server->clients();
            if (std::count_if(cs.begin(), cs.end(), [&](const auto& c) { return c.state == state; }) == static_cast<long>(n))
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }
};

// A READ of our own on `c`'s queue pair: `len` bytes at (addr, rkey) into `buf` (registered with
// `lkey`), and how its completion ended.
ibv_wc_status rogue_read(PullClient& c, void* buf, uint32_t len, uint32_t lkey, uint64_t addr, uint32_t rkey) {
    Endpoint& ep = c.endpoint();
    if (post_one(ep.qp.get(), IBV_WR_RDMA_READ, buf, len, lkey, addr, rkey) != 0) return IBV_WC_GENERAL_ERR;
    ibv_wc wc{};
    for (int i = 0; i < 10000; ++i) {
        if (ibv_poll_cq(ep.cq.get(), 1, &wc) == 1) return wc.status;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return IBV_WC_RESP_TIMEOUT_ERR;
}

}  // namespace

TEST(RdmaPullServer, ClientsReadExactlyWhatIsServedAndTheServerCountsIt) {
    VMM_REQUIRE(need::rdma());
    PullSetup s;
    std::vector<std::thread> readers;
    std::vector<std::string> failures(3);
    for (int k = 0; k < 3; ++k) {
        readers.emplace_back([&, k] {
            auto c = s.client();
            std::vector<uint8_t> out(kRam);
            // The whole, then ranges across pieces and at odd offsets.
            if (auto r = c->read(out.data(), kRam, 0); !r) failures[k] = r.error().message();
            if (std::memcmp(out.data(), s.served.ram.p, kRam) != 0) failures[k] += " whole read differs";
            for (auto [at, n] : {std::pair<uint64_t, uint64_t>{4095, 3 * PullClient::kPiece + 17}, {kRam - 1, 1}, {12345, 1}}) {
                std::vector<uint8_t> part(n);
                if (auto r = c->read(part.data(), n, at); !r) failures[k] += r.error().message();
                if (std::memcmp(part.data(), s.served.ram.p + at, n) != 0) failures[k] += " a range differs";
            }
            std::vector<uint8_t> one(2);
            if (c->read(one.data(), 2, kRam - 1)) failures[k] += " a read past the end went through";
        });
    }
    for (auto& t : readers) t.join();
    for (const auto& f : failures) EXPECT_EQ(f, "");
    ASSERT_TRUE(s.eventually_in(PullServer::Client::State::done, 3));
    for (const auto& c : s.server->clients()) {
        EXPECT_EQ(c.pulled, kRam + 3 * PullClient::kPiece + 17 + 1 + 1) << c.peer;
        EXPECT_NE(c.peer.find(rdma_addr()), std::string::npos) << c.peer;
    }
}

TEST(RdmaPullServer, AReadPastWhatIsServedOrWithAnotherServersKeyIsRefusedAndOthersPullOn) {
    VMM_REQUIRE(need::rdma());
    PullSetup s;
    PullSetup other;
    auto rogue = s.client();
    auto mapped = vmm::Mapping::map("rogue", 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    ASSERT_TRUE(mapped);
    vmm::Mapping buf = std::move(*mapped);
    auto mr = rogue->endpoint().memory().register_memory(buf.data(), buf.size(), Use::pull_landing, "rogue");
    ASSERT_TRUE(mr) << mr.error().message();
    const PullMessage& o = rogue->offer();
    EXPECT_NE(rogue_read(*rogue, buf.data(), 4096, (*mr)->lkey, o.address + o.length, o.rkey), IBV_WC_SUCCESS);
    auto rogue2 = s.client();
    auto mr2 = rogue2->endpoint().memory().register_memory(buf.data(), buf.size(), Use::pull_landing, "rogue");
    ASSERT_TRUE(mr2);
    EXPECT_NE(rogue_read(*rogue2, buf.data(), 4096, (*mr2)->lkey, other.server->address(), other.server->rkey()),
              IBV_WC_SUCCESS);
    for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(buf.data()[i], 0) << "a refused READ read something";
    // An honest client beside them reads the whole, and the served bytes are as they were.
    auto honest = s.client();
    std::vector<uint8_t> out(kRam);
    ASSERT_TRUE(honest->read(out.data(), kRam, 0));
    EXPECT_EQ(std::memcmp(out.data(), s.served.ram.p, kRam), 0);
    Served fresh;
    EXPECT_EQ(std::memcmp(s.served.ram.p, fresh.ram.p, kRam), 0);
}

TEST(RdmaPullServer, AClientThatSendsGarbageIsCutOffNamedAndOthersPullOn) {
    VMM_REQUIRE(need::rdma());
    PullSetup s;
    auto rogue = s.client();
    auto mapped = vmm::Mapping::map("rogue", 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    ASSERT_TRUE(mapped);
    vmm::Mapping buf = std::move(*mapped);
    std::memset(buf.data(), 0x77, kPullMessageSize);
    auto mr = rogue->endpoint().memory().register_memory(buf.data(), buf.size(), Use::pull_landing, "rogue");
    ASSERT_TRUE(mr);
    ASSERT_EQ(post_one(rogue->endpoint().qp.get(), IBV_WR_SEND, buf.data(), kPullMessageSize, (*mr)->lkey), 0);
    ASSERT_TRUE(s.eventually_in(PullServer::Client::State::gone, 1));
    auto cs = s.server->clients();
    ASSERT_EQ(cs.size(), 1u);
    EXPECT_NE(cs[0].why.find("a message of unknown type"), std::string::npos) << cs[0].why;
    auto honest = s.client();
    std::vector<uint8_t> out(kRam);
    ASSERT_TRUE(honest->read(out.data(), kRam, 0));
    EXPECT_EQ(std::memcmp(out.data(), s.served.ram.p, kRam), 0);
}

TEST(RdmaPullServer, AMigrationSourceIsRefusedInWords) {
    VMM_REQUIRE(need::rdma());
    PullSetup s;
    auto ep = connect_endpoint(rdma_addr(), s.port, PrivateData{kProtocolVersion, kCapPinAll}, -1, kTimeouts,
                               [](Endpoint&) { return Status{}; });
    ASSERT_FALSE(ep);
    EXPECT_NE(ep.error().message().find("this is an rdma-pull server"), std::string::npos) << ep.error().message();
    EXPECT_TRUE(s.server->clients().empty());
}

}  // namespace rdma_migrate::test
