// Multifd migrations between two vmm processes on loopback: RAM over several connections,
// each with its own thread on both sides, or inline on the one connection (multifd off, the
// default). Digests compared as in every migration test.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

TEST(Multifd, StressGuestConvergesOverThreeTcpLanes) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("mfd-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append",
                                     "bytes=" + sized("16M", "2M")});  // converges in the nested VM too
    auto dst = destination("mfd-dst", tcp_uri(port));
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_capability multifd on"), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter multifd-channels 3"), "");
    EXPECT_NE(src->cmd("info migrate_parameters").find("multifd-channels: 3"), std::string::npos);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    expect_handover(*src, *dst);
    EXPECT_GE(std::stoull(src->migrate_field("dirty sync count")), 2u) << "no dirty round ran over the lanes";
    EXPECT_NE(dst->log().find("incoming migration from the migration source, RAM over 3 multifd lanes"),
              std::string::npos)
        << dst->log();
    // The destination counts what its lanes wrote: as many pages as the source sent.
    EXPECT_EQ(dst->migrate_field("normal"), src->migrate_field("normal")) << dst->cmd("info migrate");
}

TEST(Multifd, OffByDefaultSendsRamInlineOnOneConnection) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("inline-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append",
                                        "bytes=" + sized("16M", "2M")});
    auto dst = destination("inline-dst", tcp_uri(port));
    ASSERT_TRUE(src && dst);
    EXPECT_NE(src->cmd("info migrate_capabilities").find("multifd: off"), std::string::npos) << "off by default";
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    expect_handover(*src, *dst);
    EXPECT_NE(dst->log().find("incoming migration from the migration source\n"), std::string::npos) << dst->log();
}

TEST(Multifd, PatternGuestsOwnCheckPassesAfterUnixLanes) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("mfd.sock");
    auto src = Vm::start("mfd-unix-src", {"--guest", "pattern", "-m", "128M", "--smp", "1", "--append",
                                          "bytes=32M check=512"});
    auto dst = destination("mfd-unix-dst", "unix:" + path, "128M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_capability multifd on"), "");  // 2 lanes, QEMU's default count
    ASSERT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 60)) << src->cmd("info guest");
    std::string out = src->cmd("migrate unix:" + path);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << dst->log();
    uint64_t results = dst->guest_value("results");
    expect_handover(*src, *dst);
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 2; }, 60)) << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
}

// A lane hello with no migration behind it, as the first connection, is no source: it is kept,
// since a migration's lanes may arrive before its main connection, and goes with a warning when
// the migration that arrives is not its own. The real multifd source then migrates, three lanes
// and all.
TEST(Multifd, ALaneWithoutItsMigrationIsDroppedAndTheRealSourceFollows) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto dst = destination("mfd-stray-dst", tcp_uri(port));
    ASSERT_TRUE(dst);
    UniqueFd stray = tcp_connect(port);
    ASSERT_TRUE(stray);
    const uint8_t hello[24] = {'V', 'M', 'M', 'L', 'A', 'N', 'E', '\n', 1, 0, 0, 0, 0, 0, 0, 0, 7};
    ASSERT_EQ(::write(stray.get(), hello, sizeof(hello)), 24);
    auto src = Vm::start("mfd-stray-src", {"--guest", "pattern", "-m", "256M", "--smp", "2", "--append", "bytes=4M"});
    ASSERT_TRUE(src);
    ASSERT_EQ(src->cmd("migrate_set_capability multifd on"), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter multifd-channels 3"), "");
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    expect_handover(*src, *dst);
    EXPECT_NE(dst->log().find("RAM over 3 multifd lanes"), std::string::npos) << dst->log();
    std::string log = dst->log();
    EXPECT_TRUE(log.find("not a lane of this migration") != std::string::npos ||
                log.find("no part of the migration taken") != std::string::npos)
        << "the stray lane went without a word:\n" << log;
}

}  // namespace vmm::test
