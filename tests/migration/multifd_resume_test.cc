// A multifd precopy whose link breaks (x-resume-window), any of its connections alone or all of
// them: both sides wait in precopy-paused, the guest runs on at the source, and a new connection
// brings new lanes; the destination says which pages its lanes landed whole, and the source
// sends only the rest. Cut by a forwarder neither vmm knows about.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "tests/support/kvm_fixture.h"
#include "tests/support/postcopy.h"
#include "tests/support/require.h"
#include "tests/support/switchover_cut.h"
#include "tests/support/tcp_proxy.h"
#include "tests/support/test_pki.h"
#include "tests/support/vm_pair.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::test {
namespace {

// A guest rewriting 2 MiB beside 96 MiB the host filled, and a destination, both with multifd
// on over `lanes` lanes (and `creds` for TLS); the source migrates at 32 MB/s through `link`
// and returns a good part into its bulk round.
struct LanePair {
    uint16_t port = 0;  // the destination's
    std::unique_ptr<Vm> src, dst;
    std::unique_ptr<TcpProxy> link;
};

void start_pair(LanePair& p, const std::string& name, const std::string& lanes, const std::string& creds = "",
                const std::string& capability = "") {
    uint16_t port = p.port = free_tcp_port();
    p.src = Vm::start(name + "-src", {"--guest", "stress", "-m", "256M", "--smp", "1", "--prefill", "96M", "--append",
                                      "bytes=" + sized("2M", "512K")});
    p.dst = Vm::start(name + "-dst", {"-m", "256M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(p.src && p.dst);
    for (Vm* vm : {p.src.get(), p.dst.get()}) {
        ASSERT_EQ(vm->cmd("migrate_set_capability multifd on"), "");
        ASSERT_EQ(vm->cmd("migrate_set_parameter multifd-channels " + lanes), "");
        if (!capability.empty()) {
            ASSERT_EQ(vm->cmd("migrate_set_capability " + capability + " on"), "");
        }
        if (!creds.empty()) {
            ASSERT_EQ(vm->cmd("migrate_set_parameter tls-creds " + creds), "");
            ASSERT_EQ(vm->cmd("migrate_set_parameter tls-hostname 127.0.0.1"), "");
        }
    }
    ASSERT_EQ(p.dst->cmd("migrate_incoming " + tcp_uri(port)), "");
    p.link = std::make_unique<TcpProxy>(port);
    ASSERT_EQ(p.src->cmd("migrate_set_parameter max-bandwidth 32m"), "");
    ASSERT_EQ(p.src->cmd("migrate -d " + tcp_uri(p.link->port())), "");
    ASSERT_TRUE(eventually([&] { return number(*p.src, "transferred ram") > 24 * 1024 || p.src->migrate_status() == "failed"; }, 60));
    ASSERT_EQ(p.src->migrate_status(), "active") << p.src->cmd("info migrate");
}

void expect_resumed_whole(LanePair& p, const std::string& lanes) {
    Vm& src = *p.src;
    Vm& dst = *p.dst;
    ASSERT_TRUE(eventually([&] { return src.migrate_status() == "completed"; }, 120)) << src.cmd("info migrate") << src.log();
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "completed"; }, 30)) << dst.cmd("info migrate") << dst.log();
    EXPECT_EQ(src.migrate_field("precopy resumes").substr(0, 2), "1 ") << src.cmd("info migrate");
    EXPECT_EQ(dst.migrate_field("precopy resumes").substr(0, 2), "1 ") << dst.cmd("info migrate");
    EXPECT_NE(dst.log().find("RAM over " + lanes + " multifd lanes"), std::string::npos) << dst.log();
    // What landed at the destination, across both connections' lanes: the 96 MiB filled, the
    // payload and what the guest rewrote (an unbroken run lands 99.5 MiB), with nothing the
    // lanes had landed whole sent again. (The source counts more: what it wrote into the broken
    // link before it learnt of the break went nowhere.)
    EXPECT_LT(number(dst, "transferred ram"), 106u * 1024) << dst.cmd("info migrate") << src.cmd("info migrate");
    EXPECT_GE(number(dst, "transferred ram"), 96u * 1024) << dst.cmd("info migrate");
    expect_handover(src, dst);
}

}  // namespace

// One lane's connection breaks alone in the bulk round: the whole migration pauses (the other
// lanes and the main connection are ended too), resumes at once over a new connection with new
// lanes, and completes with the same RAM.
TEST(MultifdResume, OneLaneBreakingPausesAndResumesTheMigration) {
    VMM_REQUIRE(need::kvm());
    LanePair p;
    ASSERT_NO_FATAL_FAILURE(start_pair(p, "mfr-lane", "2"));
    // The source opened the main connection (0), then its lanes (1, 2).
    ASSERT_EQ(p.link->connections(), 3) << p.src->log();
    ASSERT_TRUE(p.link->cut_one(2));
    ASSERT_NO_FATAL_FAILURE(expect_resumed_whole(p, "2"));
    EXPECT_NE(p.src->log().find("multifd lane"), std::string::npos) << "the break named the lane:\n" << p.src->log();
}

// The main connection alone breaks, while the lanes are busy: the same; under verify-ram the
// new lanes check what they land as the first did.
TEST(MultifdResume, TheMainConnectionBreakingAloneIsResumedToo) {
    VMM_REQUIRE(need::kvm());
    LanePair p;
    ASSERT_NO_FATAL_FAILURE(start_pair(p, "mfr-main", "2", "", "verify-ram"));
    ASSERT_TRUE(p.link->cut_one(0));
    ASSERT_NO_FATAL_FAILURE(expect_resumed_whole(p, "2"));
    EXPECT_GE(number(*p.dst, "verified ram"), 96u * 1024) << p.dst->cmd("info migrate");
}

// Every connection down for a second, four lanes, over TLS: both sides precopy-paused, the guest
// running at the source; the new connection and its lanes are authenticated again.
TEST(MultifdResume, FourLanesOverTlsDownForASecond) {
    VMM_REQUIRE(need::kvm(), need::certtool());
    TestPki pki("vmm-mfr-tls");
    std::string creds = pki.make("pki", "--server 127.0.0.1");
    ASSERT_FALSE(creds.empty()) << "make-test-pki.sh failed";
    LanePair p;
    ASSERT_NO_FATAL_FAILURE(start_pair(p, "mfr-tls", "4", creds));
    p.link->cut();
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "precopy-paused"; }, 30)) << p.src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return p.dst->migrate_status() == "precopy-paused"; }, 30)) << p.dst->cmd("info migrate");
    uint64_t steps = p.src->guest_value("steps");
    ASSERT_TRUE(eventually([&] { return p.src->guest_value("steps") > steps + 1; }, 30)) << "the guest stopped while paused";
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the outage: a second
    p.link->mend();
    ASSERT_NO_FATAL_FAILURE(expect_resumed_whole(p, "4"));
}

// A resumption whose RAM would come on a channel the precopy did not begin with (lanes, to a
// destination whose precopy came inline) is refused in one line, and the real source then
// resumes. (Inline is always accepted: a fallback such as tcp: for rdma:.)
TEST(MultifdResume, AResumptionOnAChannelTheMigrationDidNotHaveIsRefused) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("mfr-mode-src", {"--guest", "stress", "-m", "256M", "--smp", "1", "--prefill", "96M",
                                          "--append", "bytes=" + sized("2M", "512K")});
    auto dst = destination("mfr-mode-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    TcpProxy link(port);
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 32m"), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(link.port())), "");
    ASSERT_TRUE(eventually([&] { return number(*src, "transferred ram") > 24 * 1024; }, 60)) << src->cmd("info migrate");
    link.cut();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "precopy-paused"; }, 30)) << dst->cmd("info migrate");
    migration::StreamHeader h;
    h.vcpu_count = 1;
    h.blocks = {{"pc.ram", 0, 256u << 20}};
    h.ram_mode = migration::RamMode::transport_channel;
    h.features = migration::kFeatureResumable | migration::kFeaturePrecopyResume;
    std::string answer = send_and_read(port, migration::encode_header(h));
    EXPECT_NE(answer.find("carries RAM on a channel this precopy did not begin with"), std::string::npos) << answer;
    EXPECT_EQ(dst->migrate_status(), "precopy-paused");
    link.mend();
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate");
    expect_handover(*src, *dst);
}

// The switchover as a commit with the last round on the lanes: the link cut after STATE and
// after GO (source), after READY (destination); each time one copy, the source's RAM.
TEST(MultifdResume, TheSwitchoverCutWithLanesEndsWithOneCopy) {
    VMM_REQUIRE(need::kvm());
    const std::vector<std::pair<std::string, int>> cuts = {{"src", 1}, {"src", 3}, {"dst", 2}};
    for (const auto& [side, step] : cuts) {
        ASSERT_NO_FATAL_FAILURE(expect_one_copy_after_a_cut(side, step, {"migrate_set_capability multifd on"}, "multifd lanes"));
    }
}

}  // namespace vmm::test
