// A precopy over rdma whose link breaks (x-resume-window): both sides wait in precopy-paused, the
// source's guest runs on, and a new RDMA connection (dynamic registration or rdma-pin-all, one
// channel or two, authenticated or not) carries the rest; the destination vouches for every
// round it served to its end. Broken by migrate_pause (rdma_disconnect on every queue pair, as
// a failed network would); a scratch SoftRoCE device's network taken down for good hands the
// rest to tcp (x-fallback-uri).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "tests/support/kvm_fixture.h"
#include "tests/support/postcopy.h"
#include "tests/support/require.h"
#include "tests/support/test_pki.h"
#include "tests/support/vm_pair.h"
#include "rdma_device.h"
#include "scratch_wire.h"

namespace vmm::test {
namespace {

// A guest rewriting 2 MiB beside 48 MiB the host filled, to a -S destination over rdma at
// `uri`, with the capabilities and parameters given set on both sides.
struct RdmaPair {
    std::unique_ptr<Vm> src, dst;
    std::string uri;
};

RdmaPair start(const std::string& name, const std::vector<std::string>& settings, std::string uri = rdma_uri()) {
    RdmaPair p;
    p.uri = std::move(uri);
    p.src = Vm::start(name + "-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--prefill", "48M", "--append",
                                      "bytes=2M"});
    p.dst = Vm::start(name + "-dst", {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"});
    if (!p.src || !p.dst) return p;
    for (Vm* vm : {p.src.get(), p.dst.get()})
        for (const auto& s : settings) EXPECT_EQ(vm->cmd(s), "") << s;
    // About resuming, not converging: the stress guest's 2 MiB against SoftRoCE under a loaded
    // machine (16 MB/s, and a rehearsed hand-over of 100-200 ms) may never fit the default 300 ms.
    EXPECT_EQ(p.src->cmd("migrate_set_parameter downtime-limit 3000"), "");
    EXPECT_EQ(p.dst->cmd("migrate_incoming " + p.uri), "");
    EXPECT_TRUE(eventually([&] { return p.src->guest_value("steps") >= 1; }, 120));
    return p;
}

// Migrates at `rate` (8 MB/s: seconds of bulk round under SoftRoCE) and returns once `kib`
// arrived (12 MiB).
void migrate_into_the_bulk_round(RdmaPair& p, const std::string& rate = "8m", uint64_t kib = 12 * 1024) {
    ASSERT_EQ(p.src->cmd("migrate_set_parameter max-bandwidth " + rate), "");
    ASSERT_EQ(p.src->cmd("migrate -d " + p.uri), "");
    ASSERT_TRUE(eventually([&] { return number(*p.src, "transferred ram") > kib || p.src->migrate_status() == "failed"; },
                           300));
    ASSERT_EQ(p.src->migrate_status(), "active") << p.src->cmd("info migrate") << p.src->log();
}

void expect_resumed_and_same(RdmaPair& p) {
    ASSERT_EQ(p.src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "completed" || p.src->migrate_status() == "failed"; }, 300))
        << p.src->cmd("info migrate") << p.dst->cmd("info migrate") << p.src->log() << p.dst->log();
    ASSERT_EQ(p.src->migrate_status(), "completed") << p.src->cmd("info migrate") << p.src->log() << p.dst->log();
    ASSERT_TRUE(eventually([&] { return p.dst->migrate_status() == "completed"; }, 60)) << p.dst->cmd("info migrate")
                                                                                      << p.dst->log();
    EXPECT_GE(number(*p.src, "precopy resumes"), 1u) << p.src->cmd("info migrate");
    EXPECT_GE(number(*p.dst, "precopy resumes"), 1u) << p.dst->cmd("info migrate");
    EXPECT_NE(p.src->log().find("precopy to"), std::string::npos) << p.src->log();
    expect_handover(*p.src, *p.dst);
}

// What the source's own RDMA WRITE completions vouched for in the round the link broke in: said
// in its log when it spares pages (never under verify-ram or an authenticated link, where only
// the destination's checks count).
constexpr const char* kDeliveredSpared = "pages this side's transport delivered do not go again";

// How many pages the destination said it held when the source resumed (the source's log:
// "... pages go again (the destination holds N)"); -1 when the line is missing.
int64_t held_at_resumption(Vm& src) {
    std::string log = src.log();
    const std::string key = "(the destination holds ";
    size_t at = log.find(key);
    if (at == std::string::npos) return -1;
    size_t line = log.rfind('\n', at);
    std::cout << log.substr(line == std::string::npos ? 0 : line + 1, log.find('\n', at) - line) << std::flush;
    return std::strtoll(log.c_str() + at + key.size(), nullptr, 10);
}

// migrate_pause in the bulk round: both sides precopy-paused, the guest running at the source,
// which connects again at once (the link it cut is there), and the migration completes. Without
// sums, the bulk round's writes that completed before the cut do not go again. With them (where
// only the destination's checks count), the pages whose sums it checked before the cut do not:
// cut after 20 MiB, of which the sums of at least 8 MiB had gone (they go per 8 MiB landed), it
// must hold at least 4 MiB of the bulk round, the one the link broke in.
void cut_and_resume(const std::string& name, const std::vector<std::string>& settings, bool sums = false) {
    auto p = start(name, settings);
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_NO_FATAL_FAILURE(migrate_into_the_bulk_round(p, "8m", sums ? 20 * 1024 : 12 * 1024));
    ASSERT_EQ(p.src->cmd("migrate_pause"), "");
    ASSERT_TRUE(eventually([&] { return number(*p.dst, "precopy resumes") >= 1; }, 120))
        << p.dst->cmd("info migrate") << p.dst->log() << p.src->log();
    ASSERT_NO_FATAL_FAILURE(expect_resumed_and_same(p));
    EXPECT_EQ(p.src->log().find(kDeliveredSpared) != std::string::npos, !sums) << p.src->log();
    if (sums) {
        EXPECT_GE(held_at_resumption(*p.src), 1024) << p.src->log() << p.dst->log();
    }
}

}  // namespace

TEST(RdmaResume, DynamicRegistrationCutInTheBulkRound) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    cut_and_resume("rres-dyn", {});
}

TEST(RdmaResume, PinAllOverTwoChannelsCutInTheBulkRound) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    cut_and_resume("rres-pin", {"migrate_set_capability rdma-pin-all on", "migrate_set_parameter rdma-channels 2"});
}

TEST(RdmaResume, VerifyRamCutInTheBulkRound) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    cut_and_resume("rres-verify", {"migrate_set_capability verify-ram on"}, true);
}

// Authenticated: the new connection's TLS handshake authenticates both sides again; every page
// still goes with its MAC.
TEST(RdmaResume, AnAuthenticatedLinkCutInTheBulkRound) {
    VMM_REQUIRE(need::kvm(), need::rdma(), need::certtool());
    TestPki pki("vmm-rres-tls");
    std::string creds = pki.make("pki", "--server " + rdma_addr());
    ASSERT_FALSE(creds.empty()) << "make-test-pki.sh failed";
    cut_and_resume("rres-tls", {"migrate_set_parameter tls-creds " + creds}, true);
}

// The source cannot reach the destination again within x-resume-window: the migration fails
// with the source's guest running; the destination ends at the source's window.
TEST(RdmaResume, PastTheWindowItFailsAndTheGuestRunsOn) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start("rres-past", {"migrate_set_parameter x-resume-window 2000", "migrate_set_parameter x-connect-timeout 1000"});
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_NO_FATAL_FAILURE(migrate_into_the_bulk_round(p));
    p.dst->forget_monitor();
    p.dst->process().signal(SIGSTOP);  // there, but answering nothing
    ASSERT_EQ(p.src->cmd("migrate_pause"), "");
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "failed"; }, 120)) << p.src->cmd("info migrate");
    EXPECT_NE(p.src->migrate_field("error").find("x-resume-window (2000 ms)"), std::string::npos) << p.src->cmd("info migrate");
    EXPECT_EQ(p.src->status(), "running");
    p.dst->process().signal(SIGCONT);
    EXPECT_EQ(p.dst->process().wait(std::chrono::seconds(60)), std::optional<int>(1)) << p.dst->log();
}

// A SoftRoCE device of the test's own, rxe8 on dummy8 at 10.99.8.1, whose network it may take
// down: only where VMM_RDMA_HOTPLUG=1 says the machine's RDMA devices are the tests' to change.
struct ScratchFabric {
    static int sh(const std::string& cmd) { return std::system(cmd.c_str()); }
    ScratchFabric() {
        made = sh("ip link add dummy8 type dummy && ip addr add 10.99.8.1/24 dev dummy8 && ip link set dummy8 up && "
                  "rdma link add rxe8 type rxe netdev dummy8") == 0;
    }
    ~ScratchFabric() { sh("rdma link delete rxe8 2>/dev/null; ip link del dummy8 2>/dev/null"); }
    static std::string uri() { return "rdma:10.99.8.1:" + std::to_string(free_tcp_port()); }
    bool down() { return sh("ip link set dummy8 down") == 0; }
    bool made = false;
};

#define VMM_REQUIRE_SCRATCH_FABRIC()                                                                                  \
    if (std::getenv("VMM_RDMA_HOTPLUG") == nullptr)                                                                   \
    GTEST_SKIP() << "needs an RDMA device whose network the test may take down (VMM_RDMA_HOTPLUG=1, as in the "      \
                    "SoftRoCE VM: scripts/softroce-run.sh ctest --test-dir build -L rdma)"

// The fabric stays down: with x-fallback-uri the rest goes over tcp from where it stopped (the
// destination listens there too: migrate_recover while it runs), and the statistics say how much
// went each way.
TEST(RdmaResume, AFabricThatStaysDownHandsTheRestToTcp) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    VMM_REQUIRE_SCRATCH_FABRIC();
    ScratchFabric fabric;
    ASSERT_TRUE(fabric.made);
    std::string tcp = tcp_uri(free_tcp_port());
    auto p = start("rres-fb", {}, ScratchFabric::uri());
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_EQ(p.src->cmd("migrate_set_parameter x-fallback-uri " + tcp), "");
    // At 1 MB/s: the commands that take the fabric down land in the bulk round however long a
    // loaded TCG makes them (at 8 MB/s the migration of dce253e's CI ended before them).
    ASSERT_NO_FATAL_FAILURE(migrate_into_the_bulk_round(p, "1m", 4 * 1024));
    ASSERT_EQ(p.dst->cmd("migrate_recover " + tcp), "");  // while it runs: a second way in
    ASSERT_TRUE(fabric.down());
    ASSERT_NO_FATAL_FAILURE(expect_resumed_and_same(p));
    std::string ways = p.src->migrate_field("ways");
    EXPECT_NE(ways.find(p.uri + " "), std::string::npos) << p.src->cmd("info migrate");
    EXPECT_NE(ways.find(", then " + tcp + " "), std::string::npos) << p.src->cmd("info migrate");
}

// Migrates over `wire` (which had carried `before` packets) at 1 MB/s from the start, so that
// the cut lands in the bulk round however long the commands to make it take (seconds under a
// loaded TCG), and cuts it there: the migration must have crossed the wire, and not ended.
void cut_in_the_bulk_round(RdmaPair& p, ScratchWire& wire, uint64_t before) {
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_NO_FATAL_FAILURE(migrate_into_the_bulk_round(p, "1m", 4 * 1024));
    ASSERT_GT(ScratchWire::carried(), before + 1000) << "the migration does not cross the wire:\n" << ScratchWire::explain();
    ASSERT_TRUE(wire.cut());
    ASSERT_NE(p.src->migrate_status(), "completed") << "the cut came too late to test anything";
}

// The wire goes dark in the bulk round (every packet dropped, both ways) until both sides have
// paused, and 2 s more: when it comes back, the source's next connection request (it keeps
// trying within x-resume-window) reaches the destination still listening, and the migration
// completes with no command typed.
TEST(RdmaResume, AWireDarkUntilBothPauseResumesWhenItComesBack) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    VMM_REQUIRE_SCRATCH_FABRIC();
    ScratchWire wire;
    if (!wire.missing.empty()) GTEST_SKIP() << "needs " << wire.missing;
    ASSERT_TRUE(wire.made);
    uint64_t before = ScratchWire::carried();
    auto p = start("rres-dark", {}, ScratchWire::uri());
    ASSERT_NO_FATAL_FAILURE(cut_in_the_bulk_round(p, wire, before));
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "precopy-paused" && p.dst->migrate_status() == "precopy-paused"; },
                           120))
        << p.src->cmd("info migrate") << p.dst->cmd("info migrate");
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the outage goes on
    ASSERT_TRUE(wire.mend());
    ASSERT_NO_FATAL_FAILURE(expect_resumed_and_same(p));
}

// Dark for 2 s only: the migration completes with equal RAM and no command typed, whether the
// queue pairs' own retries rode the outage out or the link broke and the migration resumed.
TEST(RdmaResume, AWireDarkForTwoSecondsCostsOnlyTime) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    VMM_REQUIRE_SCRATCH_FABRIC();
    ScratchWire wire;
    if (!wire.missing.empty()) GTEST_SKIP() << "needs " << wire.missing;
    ASSERT_TRUE(wire.made);
    uint64_t before = ScratchWire::carried();
    auto p = start("rres-flap", {}, ScratchWire::uri());
    ASSERT_NO_FATAL_FAILURE(cut_in_the_bulk_round(p, wire, before));
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the outage itself
    ASSERT_TRUE(wire.mend());
    ASSERT_EQ(p.src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "completed" || p.src->migrate_status() == "failed"; }, 300));
    ASSERT_EQ(p.src->migrate_status(), "completed") << p.src->cmd("info migrate") << p.src->log() << p.dst->log();
    ASSERT_TRUE(eventually([&] { return p.dst->migrate_status() == "completed"; }, 60)) << p.dst->cmd("info migrate");
    std::cout << "precopy resumes: " << number(*p.src, "precopy resumes") << "\n";
    expect_handover(*p.src, *p.dst);
}

}  // namespace vmm::test
