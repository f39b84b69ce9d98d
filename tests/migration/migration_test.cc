// Live migration between two vmm processes on loopback. Every successful migration compares
// the RAM digests of the source (paused for good in postmigrate) and the destination (started
// with -S, before it resumes), then checks the guest carries on at the destination.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <sstream>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/setup_parts.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

namespace {
// Nothing listens on 127.0.0.1:port (a connection in TIME_WAIT does not count, as for vmm's own
// listener, which binds with SO_REUSEADDR).
bool port_is_free(uint16_t port) {
    UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}
}  // namespace

TEST(Migration, IdleGuestOverTcp) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("idle-src", {"--guest", "idle", "-m", "256M", "--smp", "2", "--append", "tick_ms=20"});
    auto dst = destination("idle-dst", tcp_uri(port));
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(dst->status(), "inmigrate");
    std::string out = src->cmd("migrate " + tcp_uri(port));  // without -d: waits, with a progress bar
    EXPECT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    EXPECT_NE(out.find("] 100%"), std::string::npos) << out;
    expect_handover(*src, *dst);
    // The destination rehearsed saving and loading its state; the controller counted it.
    EXPECT_GT(ms_field(*src, "hand-over estimate"), 0.0) << src->cmd("info migrate");
    // Setup in parts adding up to it: tcp reports no steps of its own.
    expect_setup_parts(*src, {"start", "connect", "header", "ram-setup"});
    expect_setup_parts(*dst, {"header"});
    // An idle guest touched little: most of its RAM was never read, let alone sent.
    EXPECT_GT(std::stoull(src->migrate_field("unpopulated (skipped)").c_str()), 60000u);
    // The destination no longer listens: the next migration to this host may use the same port.
    EXPECT_TRUE(wait_for([&] { return port_is_free(port); }, std::chrono::seconds(5)))
        << "the destination still listens on " << port << " after the migration";
    // The guest runs at the destination now: a plain `cont` here would run a second copy.
    std::string refused = src->cmd("cont");
    EXPECT_NE(refused.find("would run a second copy ('cont -f' forces it)"), std::string::npos) << refused;
    EXPECT_EQ(src->status(), "postmigrate");
    EXPECT_EQ(src->cmd("cont -f"), "");  // the user's explicit choice
    EXPECT_EQ(src->status(), "running");
    // Made once: a later pause and resume of the guest that lives here is a plain one.
    EXPECT_EQ(src->cmd("stop"), "");
    EXPECT_EQ(src->cmd("cont"), "");
    EXPECT_EQ(src->status(), "running");
}

// A long run of data (host-filled RAM) is announced, and the destination's helper thread
// populates it ahead of the data; the RAM still matches byte for byte.
TEST(Migration, TheDestinationPopulatesAnnouncedRunsAhead) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("fill-src", {"--guest", "idle", "-m", "128M", "--smp", "1", "--prefill", "96M"});
    auto dst = destination("fill-dst", tcp_uri(port), "128M", "1");
    ASSERT_TRUE(src && dst);
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    expect_handover(*src, *dst);
    std::string line = dst->migrate_field("populated ahead");  // "A of B kbytes announced"
    uint64_t ahead = 0, announced = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lu of %lu kbytes announced", &ahead, &announced), 2) << dst->cmd("info migrate");
    // Nearly all of it: runs of at most one record (around the payload, zero pages) go unannounced.
    EXPECT_GE(announced, 90u * 1024) << "the prefilled 96 MiB were not announced";
    EXPECT_LE(ahead, announced);
    EXPECT_GT(ahead, 0u) << "the helper populated nothing ahead of 96 MiB of data";
    EXPECT_EQ(src->migrate_field("populated ahead"), "") << "only a destination reports it";
}

TEST(Migration, IdleGuestOverUnixSocket) {
    VMM_REQUIRE(need::kvm());
    std::string path = temp_path("mig.sock");
    auto src = Vm::start("unix-src", {"--guest", "idle", "-m", "64M", "--smp", "1", "--append", "tick_ms=20"});
    auto dst = destination("unix-dst", "unix:" + path, "64M", "1");
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate -d unix:" + path), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 60)) << src->cmd("info migrate");
    expect_handover(*src, *dst);
}

TEST(Migration, StressGuestConverges) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    // 16 MiB rewritten over and over by 2 vCPUs converges at loopback speed under a host's KVM; in
    // the nested VM, where the guest runs at TCG's pace and so does every copy, 2 MiB does.
    auto src = Vm::start("stress-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append",
                                        "bytes=" + sized("16M", "2M")});
    auto dst = destination("stress-dst", tcp_uri(port));
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    expect_handover(*src, *dst);
    // The round log: the bulk round, any dirty rounds, and the paused round last, whose
    // bytes add up to the RAM the migration put on the wire (records and all).
    std::istringstream rounds(src->cmd("info migrate-rounds"));
    std::string line;
    std::getline(rounds, line);
    EXPECT_NE(line.find("MB/s"), std::string::npos) << line;
    uint64_t sum = 0, n = 0, last_dirty = 1;
    for (uint32_t want = 0; std::getline(rounds, line); ++want, ++n) {
        std::istringstream f(line);
        uint32_t round = 0;
        uint64_t bytes = 0;
        double ms = 0, mbs = 0;
        f >> round >> bytes >> ms >> mbs >> last_dirty;
        EXPECT_EQ(round, want) << line;
        sum += bytes;
    }
    EXPECT_GE(n, 2u);
    EXPECT_EQ(last_dirty, 0u) << "the paused round leaves nothing dirty";
    uint64_t transferred = std::stoull(src->migrate_field("transferred ram")) * 1024;
    // The downtime's parts, measured on the same clock, add up to no more than the whole: the
    // whole is shown in whole ms (cut down, up to 1 ms less), each part to 0.1 ms (rounded, up to
    // 0.05 ms more).
    std::istringstream parts(src->migrate_field("downtime parts"));
    std::string word;
    double part = 0, parts_ms = 0;
    int shown = 0;
    while (parts >> word) {
        if (std::sscanf(word.c_str(), "%lf", &part) == 1) parts_ms += part, ++shown;
    }
    EXPECT_GT(parts_ms, 0.0) << src->cmd("info migrate");
    EXPECT_LE(parts_ms, static_cast<double>(std::stoull(src->migrate_field("downtime"))) + 1.0 + 0.05 * shown)
        << src->cmd("info migrate");
    EXPECT_LE(sum, transferred + 1024);
    EXPECT_GE(sum, transferred * 9 / 10) << "the rounds must account for the RAM sent";
}

TEST(Migration, PatternGuestsOwnCheckPassesOnTheDestination) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("pattern-src", {"--guest", "pattern", "-m", "128M", "--smp", "1", "--append", "bytes=32M check=512"});
    auto dst = destination("pattern-dst", tcp_uri(port), "128M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 60)) << src->cmd("info guest");
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
    uint64_t results = dst->guest_value("results");
    expect_handover(*src, *dst);
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 2; }, 60))
        << "the pattern check did not pass again on the destination:\n" << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
    // The pause across the switchover, timed from the guest's clock reads, spans at least the
    // source's downtime (the guest cannot read the clock while paused; here it also spans the
    // destination's -S), and the guest reported the same gap (the same two reads), or a longer
    // one, itself.
    // In the nested VM the guest rests 20 ms a step (Vm::start), and a rest is not a pause: only
    // what the switchover overran of the rest it landed in is.
    double pause = ms_field(*dst, "guest-observed pause"), reported = ms_field(*dst, "guest's longest pause reported");
    EXPECT_GE(pause + pattern_rest_ms(), ms_field(*src, "downtime")) << dst->cmd("info migrate") << src->cmd("info migrate");
    EXPECT_GE(reported + 0.001, pause) << dst->cmd("info migrate");
    // Gaps while precopy ran (if the guest read its clock then; this migration is quick) are
    // gaps the guest saw too.
    EXPECT_GE(reported + 0.001, ms_field(*src, "guest's longest stall before the switchover")) << src->cmd("info migrate");
}

TEST(Migration, DirtyRateAboveTheCapConvergesOnlyWithAutoConverge) {
    VMM_REQUIRE(need::kvm());
    // The guest rewrites its 8 MiB in about 0.15 s here (16,000 pages/s); a round at 16 MB/s
    // takes 0.5 s, so even a guest slowed to a quarter by a busy host dirties all of it again
    // each round, and 8 MiB is more than the 300 ms downtime limit lets go at 16 MB/s. (At
    // 32 MiB and 64 MB/s a round took as long as one pass of the guest, and a busy host let
    // the first migration converge on its own.)
    auto src = Vm::start("ac-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--append", "bytes=8M"});
    ASSERT_TRUE(src);
    for (const char* c : {"migrate_set_parameter max-bandwidth 16m", "migrate_set_parameter x-throttle-after-rounds 1",
                          "migrate_set_parameter cpu-throttle-initial 50", "migrate_set_parameter cpu-throttle-increment 20"})
        ASSERT_EQ(src->cmd(c), "") << c;
    uint16_t port1 = free_tcp_port();
    auto dst1 = destination("ac-dst1", tcp_uri(port1), "128M", "1");
    ASSERT_TRUE(dst1);
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port1)), "");
    // Without auto-converge the guest dirties its 8 MiB faster than 16 MB/s can carry it.
    ASSERT_TRUE(eventually([&] { return std::stoul("0" + src->migrate_field("rounds")) >= 4; }, 60));
    EXPECT_EQ(src->migrate_status(), "active") << src->cmd("info migrate");
    EXPECT_EQ(src->migrate_field("cpu throttle percentage"), "0");
    src->cmd("migrate_cancel");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "cancelled"; }, 30));
    EXPECT_EQ(src->status(), "running");

    ASSERT_EQ(src->cmd("migrate_set_capability auto-converge on"), "");
    uint16_t port2 = free_tcp_port();
    auto dst2 = destination("ac-dst2", tcp_uri(port2), "128M", "1");
    ASSERT_TRUE(dst2);
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port2)), "");
    bool throttled = false;
    ASSERT_TRUE(eventually([&] {
        throttled = throttled || src->migrate_field("cpu throttle percentage") != "0";
        return src->migrate_status() == "completed";
    }, 120)) << src->cmd("info migrate");
    EXPECT_TRUE(throttled) << "it converged without throttling: the test's dirty rate is too low";
    expect_handover(*src, *dst2);
}

TEST(Migration, CancelMidwayKeepsTheSourceRunning) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("cancel-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append", "bytes=16M"});
    auto dst = destination("cancel-dst", tcp_uri(port));
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 8m"), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "active"; }, 30));
    EXPECT_EQ(src->cmd("migrate_cancel"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "cancelled"; }, 30)) << src->cmd("info migrate");
    EXPECT_EQ(src->status(), "running");
    uint64_t steps = src->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 30));
    dst->forget_monitor();
    auto code = dst->process().wait(std::chrono::seconds(60));
    EXPECT_EQ(code, std::optional<int>(1)) << dst->log();
    EXPECT_NE(dst->log().find("vmm: error: incoming migration failed: "), std::string::npos) << dst->log();
}

TEST(Migration, DestinationKilledMidwayThenASecondMigrationSucceeds) {
    VMM_REQUIRE(need::kvm());
    for (const char* multifd : {"on", "off"}) {  // lanes and one connection (the default)
        SCOPED_TRACE(std::string("multifd ") + multifd);
        uint16_t port = free_tcp_port();
        auto src = Vm::start("kill-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append",
                                          "bytes=" + sized("16M", "2M")});  // the second migration converges
        auto dst = destination("kill-dst", tcp_uri(port));
        ASSERT_TRUE(src && dst);
        ASSERT_EQ(src->cmd(std::string("migrate_set_capability multifd ") + multifd), "");
        ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 8m"), "");
        ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
        ASSERT_TRUE(eventually([&] { return src->migrate_status() == "active"; }, 30));
        dst->forget_monitor();
        dst->process().signal(SIGKILL);
        ASSERT_TRUE(eventually([&] { return src->migrate_status() == "failed"; }, 60)) << src->cmd("info migrate");
        EXPECT_FALSE(src->migrate_field("error").empty());
        EXPECT_EQ(src->status(), "running");
        uint64_t steps = src->guest_value("steps");
        EXPECT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 30));

        ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 0"), "");
        uint16_t port2 = free_tcp_port();
        auto dst2 = destination("kill-dst2", tcp_uri(port2));
        ASSERT_TRUE(dst2);
        std::string out = src->cmd("migrate " + tcp_uri(port2));
        ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
        expect_handover(*src, *dst2);
    }
}

TEST(Migration, AGuestPausedOnTheSourceStaysPausedOnTheDestination) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("stopped-src", {"--guest", "stress", "-m", "64M", "--smp", "1", "--append", "bytes=4M"});
    auto dst = Vm::start("stopped-dst", {"-m", "64M", "--smp", "1", "--incoming", tcp_uri(port)});  // no -S
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 1; }, 60));
    ASSERT_EQ(src->cmd("stop"), "");
    std::string out = src->cmd("migrate " + tcp_uri(port));
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out;
    EXPECT_TRUE(eventually([&] { return dst->status() == "paused"; }, 10)) << dst->status();
    expect_handover(*src, *dst);  // the same RAM; 'cont' runs it
}

TEST(Migration, RaisingMaxBandwidthAppliesToTheRunningMigration) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    // 16 MiB at 1 MB/s would take 16 s. In the nested VM, where a 16 MiB working set does not
    // converge even uncapped, 2 MiB at 128 KB/s would.
    auto src = Vm::start("bw-src", {"--guest", "stress", "-m", "256M", "--smp", "1", "--append",
                                    "bytes=" + sized("16M", "2M")});
    auto dst = destination("bw-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth " + sized("1m", "128k")), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "active"; }, 30));
    EXPECT_EQ(src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    EXPECT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 8)) << src->cmd("info migrate");
    expect_handover(*src, *dst);
}

TEST(Migration, RamSizeMismatchIsRefusedWithAClearMessage) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("size-src", {"--guest", "idle", "-m", "256M", "--smp", "2"});
    auto dst = destination("size-dst", tcp_uri(port), "128M", "2");
    ASSERT_TRUE(src && dst);
    std::string out = src->cmd("migrate " + tcp_uri(port));
    const std::string why = "RAM block 'pc.ram' is 256 MiB at 0x0 on the source but 128 MiB at 0x0 here: start the "
                            "destination with the same memory size (-m 256M)";
    EXPECT_NE(out.find("Migration status: failed"), std::string::npos) << out;
    EXPECT_NE(out.find("error: the destination refused the migration: " + why), std::string::npos) << out;
    EXPECT_EQ(src->status(), "running");
    dst->forget_monitor();
    EXPECT_EQ(dst->process().wait(std::chrono::seconds(30)), std::optional<int>(1));
    EXPECT_NE(dst->log().find("vmm: error: incoming migration failed: " + why + "\n"), std::string::npos) << dst->log();
}

TEST(Migration, APortHeldBySomethingSilentIsNamedWithinTheConnectTimeout) {
    VMM_REQUIRE(need::kvm());
    // A listener that takes connections into its backlog and never says a word.
    uint16_t port = 0;
    UniqueFd holder = tcp_listener(port);
    ASSERT_TRUE(holder);
    auto src = Vm::start("silent-src", {"--guest", "idle", "-m", "64M", "--smp", "1"});
    ASSERT_TRUE(src);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-connect-timeout 1500"), "");
    std::string out = src->cmd("migrate " + tcp_uri(port));
    EXPECT_NE(out.find("accepted the connection but did not answer the migration header within 1500 ms "
                       "(x-connect-timeout): is a vmm destination listening there, or something else?"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("Error: migration failed: "), std::string::npos) << out;
    EXPECT_EQ(src->status(), "running");
}

}  // namespace vmm::test
