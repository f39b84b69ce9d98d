// Multifd with postcopy, as QEMU 10.1 runs them together: the precopy rounds on the lanes, the
// switch, then faults and the background push on the main connection and postcopy-preempt's, the
// lanes at rest. A guest that precopy cannot finish under a cap completes with the source's RAM.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "tests/support/postcopy.h"
#include "tests/support/require.h"
#include "tests/support/tcp_proxy.h"
#include "tests/support/test_pki.h"

namespace vmm::test {
namespace {

// The destination, paused (-S) so that its RAM, once whole, is the source's at the switch.
// `tls`: both sides' tls-creds (a PKI for 127.0.0.1).
void multifd_postcopy(const std::string& name, const std::string& lanes, const std::string& tls = "") {
    uint16_t port = free_tcp_port();
    std::string uri = tcp_uri(port);
    // 16 MiB rewritten at 8 MB/s: every round has as much to send as the last, so precopy alone
    // never converges (auto-converge off), and the switch is asked after the third round.
    auto src = stress_source(name + "-src", "16M");
    auto dst = Vm::start(name + "-dst", {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(src && dst);
    for (Vm* vm : {src.get(), dst.get()}) {
        EXPECT_EQ(vm->cmd("migrate_set_capability postcopy-ram on"), "");
        if (!tls.empty()) {
            EXPECT_EQ(vm->cmd("migrate_set_parameter tls-creds " + tls), "");
            EXPECT_EQ(vm->cmd("migrate_set_parameter tls-hostname 127.0.0.1"), "");
        }
    }
    EXPECT_EQ(dst->cmd("migrate_incoming " + uri), "");
    EXPECT_EQ(src->cmd("migrate_set_capability multifd on"), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter multifd-channels " + lanes), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter max-bandwidth 8m"), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter max-postcopy-bandwidth 4m"), "");
    EXPECT_EQ(src->cmd("migrate -d " + uri), "");
    ASSERT_TRUE(eventually([&] { return number(*src, "rounds") >= 3; }, 120)) << src->cmd("info migrate") << src->log();
    EXPECT_EQ(src->migrate_status(), "active") << "precopy alone was to never finish:\n" << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("migrate_start_postcopy"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 180))
        << src->cmd("info migrate") << src->log() << dst->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(dst->ramhash(), src->ramhash()) << "the destination's RAM differs from the source's at the switch";
    EXPECT_NE(dst->log().find("RAM over " + lanes + " multifd lanes"), std::string::npos) << dst->log();
    // Missing at the switch: what the guest dirtied since its pages went over the lanes (it
    // rewrites 16 MiB), not the 128 MiB: the destination kept what the lanes brought.
    EXPECT_GT(number(*src, "postcopy missing pages"), 0u) << src->cmd("info migrate");
    EXPECT_LE(number(*src, "postcopy missing pages"), 16u * 256 + 64) << src->cmd("info migrate");  // and its own few
    EXPECT_EQ(number(*dst, "postcopy missing pages"), number(*src, "postcopy missing pages"));
    expect_handover(*src, *dst);
}

}  // namespace

TEST(MultifdPostcopy, APrecopyThatCannotFinishCompletesOverTwoLanes) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    multifd_postcopy("mfdpc2", "2");
}

TEST(MultifdPostcopy, APrecopyThatCannotFinishCompletesOverFourLanes) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    multifd_postcopy("mfdpc4", "4");
}

TEST(MultifdPostcopy, OverTlsEveryConnectionAuthenticated) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    TestPki pki("vmm-mfdpc-tls");
    std::string creds = pki.make("pki", "--server 127.0.0.1");
    ASSERT_FALSE(creds.empty()) << "make-test-pki.sh failed (needs certtool: gnutls-bin)";
    multifd_postcopy("mfdpctls", "2", creds);
}

// The link broken after the switch (migrate_pause): recovered as a postcopy without lanes is,
// over a new connection of its own (the lanes, at rest since the switch, are not reopened).
TEST(MultifdPostcopy, ABrokenLinkAfterTheSwitchIsRecovered) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("mfdpc-rec-src", "16M");
    auto dst = postcopy_destination("mfdpc-rec-dst", tcp_uri(port), "128M", "1", true);
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate_set_capability multifd on"), "");
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port), "16m", "1m");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    pause_and_recover(*src, *dst, tcp_uri(free_tcp_port()));
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(dst->ramhash(), src->ramhash());
    EXPECT_NE(dst->log().find("RAM over 2 multifd lanes"), std::string::npos) << dst->log();
    EXPECT_GE(number(*src, "postcopy recoveries"), 1u) << src->cmd("info migrate");
}

// A lane cut after the switch: the lanes rest once postcopy has begun (nothing reads or writes
// them), so the migration goes on and completes, the RAM whole.
TEST(MultifdPostcopy, ALaneCutAfterTheSwitchLeavesThePostcopyWhole) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    TcpProxy proxy(port);
    auto src = stress_source("mfdpc-lane-src", "16M");
    auto dst = postcopy_destination("mfdpc-lane-dst", tcp_uri(port), "128M", "1", true);
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate_set_capability multifd on"), "");
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(proxy.port()), "16m", "2m");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    // The source opened the main connection (0), its two lanes (1, 2), then the preempt one (3).
    ASSERT_EQ(proxy.connections(), 4) << src->log();
    EXPECT_TRUE(proxy.cut_one(1));
    EXPECT_TRUE(proxy.cut_one(2));
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(dst->ramhash(), src->ramhash());
    EXPECT_EQ(number(*src, "postcopy recoveries"), 0u) << "nothing needed recovering";
}

}  // namespace vmm::test
