// Live migration over the rdma: plugin, on a real RDMA device (label rdma). On machines
// without one, run them in the SoftRoCE nested VM:
//     scripts/softroce-run.sh ctest --test-dir build -L rdma
// Every success compares RAM digests and checks the guest runs on at the destination.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>

#include "tests/support/require.h"
#include "vmm/common/units.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/vm_pair.h"
#include "tests/support/setup_parts.h"
#include "tests/support/stats_sampling.h"
#include "rdma_device.h"

namespace vmm::test {

namespace {


// The device's IPv6 address, if it has one (scripts/lib/softroce-inside.sh gives rxe0 fd99::1).
std::string rdma_addr6() {
    const char* a = std::getenv("VMM_RDMA_ADDR6");
    return a != nullptr ? a : "";
}

struct Pair {
    std::unique_ptr<Vm> src, dst;
    std::string uri;
    bool pattern = false;  // the guest checks its own memory (results must go on growing)
};

// Guests sized for SoftRoCE under TCG (~20 MB/s): the pattern guest fills its region once
// and then only reads (a migration converges after the bulk round, and its own check proves the
// data); the stress guest rewrites 2 MiB for ever (about 100 ms of RDMA there: under the
// downtime limit, so dirty rounds run and then converge). What the limit leaves for RAM there
// depends on the hand-over the destination rehearses (20-150 ms under nested TCG), so the
// stress tests turn auto-converge on: once, a run without it took five minutes to converge.
const std::vector<std::string> kPattern{"--guest", "pattern", "--append", "bytes=8M check=64"};
const std::vector<std::string> kStress{"--guest", "stress", "--append", "bytes=2M"};

// The memory a process has pinned for RDMA, as the kernel counts it (VmPin in /proc/PID/status).
uint64_t pinned_bytes(Vm& vm) {
    std::string status = read_text_file("/proc/" + std::to_string(vm.process().pid()) + "/status");
    std::smatch m;
    static const std::regex line(R"(VmPin:\s+(\d+) kB)");
    return std::regex_search(status, m, line) ? std::stoull(m[1]) << 10 : 0;
}

// A destination told rdma-pin-all, as a person types it (--incoming defer, the capability,
// migrate_incoming): its RAM is pinned while it waits, before any source has connected.
std::unique_ptr<Vm> destination_pinning_ahead(const std::string& name, const std::string& uri) {
    auto dst = Vm::start(name, {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"});
    if (!dst) return dst;
    EXPECT_EQ(dst->cmd("migrate_set_capability rdma-pin-all on"), "");
    EXPECT_EQ(dst->cmd("migrate_incoming " + uri), "");
    EXPECT_TRUE(eventually([&] { return pinned_bytes(*dst) >= (128u << 20); }, 120))
        << "the destination did not pin its 128 MiB while waiting: VmPin " << pinned_bytes(*dst) << " bytes\n"
        << dst->log();
    return dst;
}

// `dst_wrapper` runs the destination, `src_wrapper` the source (see VmmProcess::spawn);
// `pin_ahead`: the destination is told rdma-pin-all before it listens (destination_pinning_ahead).
Pair start_pair(const std::string& name, const std::vector<std::string>& guest, std::string uri = rdma_uri(),
                const std::vector<std::string>& dst_wrapper = {}, const std::vector<std::string>& src_wrapper = {},
                bool pin_ahead = false) {
    Pair p;
    p.uri = std::move(uri);
    std::vector<std::string> args{"-m", "128M", "--smp", "1"};
    args.insert(args.end(), guest.begin(), guest.end());
    p.src = Vm::start(name + "-src", args, src_wrapper);
    p.dst = pin_ahead ? destination_pinning_ahead(name + "-dst", p.uri)
                      : Vm::start(name + "-dst", {"-m", "128M", "--smp", "1", "-S", "--incoming", p.uri}, dst_wrapper);
    p.pattern = std::find(guest.begin(), guest.end(), "pattern") != guest.end();
    // The payload is at work (the pattern guest has filled its region and checked it once).
    if (p.src) eventually([&] { return p.src->guest_value(p.pattern ? "results" : "steps") >= 1; }, 120);
    return p;
}

// start_pair with VMM_RDMA_TRACE=1 in both vmms' environment: the source logs each
// (un)registration and each round's registration work.
Pair start_traced_pair(const std::string& name, const std::vector<std::string>& guest,
                       const std::vector<std::string>& dst_wrapper = {}) {
    ::setenv("VMM_RDMA_TRACE", "1", 1);
    Pair p = start_pair(name, guest, rdma_uri(), dst_wrapper);
    ::unsetenv("VMM_RDMA_TRACE");
    return p;
}

void expect_completed_and_same(Pair& p, const std::string& out) {
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << p.src->log() << p.dst->log();
    // For the test log: how this migration went (under SoftRoCE and TCG it varies a lot), from
    // the final statistics `migrate` printed.
    std::cout << "migration: total " << text_field(out, "total time") << ", setup " << text_field(out, "setup") << ", "
              << text_field(out, "rounds") << " rounds, downtime " << text_field(out, "downtime")
              << ", hand-over estimate " << text_field(out, "hand-over estimate") << "\n";
    // A completion vouched for every write the source posted: nothing is left in flight, and
    // all the RAM sent as data counts as arrived.
    EXPECT_EQ(text_field(out, "in flight ram"), "") << out;
    EXPECT_GE(std::stoull("0" + text_field(out, "transferred ram")), std::stoull("0" + text_field(out, "normal bytes"))) << out;
    EXPECT_EQ(p.src->status(), "postmigrate") << p.src->log();
    EXPECT_EQ(p.src->ramhash(), p.dst->ramhash()) << "source and destination RAM differ";
    uint64_t steps = p.dst->guest_value("steps"), results = p.dst->guest_value("results");
    EXPECT_EQ(p.dst->cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return p.dst->guest_value("steps") > steps; }, 60))
        << "the guest did not run on\n" << p.dst->cmd("info guest") << p.dst->log();
    if (p.pattern) {
        EXPECT_TRUE(eventually([&] { return p.dst->guest_value("results") > results; }, 60))
            << "the pattern guest's check did not pass again on the destination\n" << p.dst->cmd("info guest");
    }
    EXPECT_EQ(p.dst->guest_value("errors"), 0u) << p.dst->cmd("info guest") << p.dst->log();
}

// Starts a migration at 2 MB/s and returns once it is connected and RAM is on the wire (some
// in flight), so that what the test does next happens mid-migration.
bool migrating_slowly(Pair& p) {
    if (!p.src->cmd("migrate_set_parameter max-bandwidth 2m").empty() || !p.src->cmd("migrate -d " + p.uri).empty())
        return false;
    return eventually([&] { return !p.src->migrate_field("in flight ram").empty(); }, 60);
}

// After a failed migration: the source's guest runs on, and a migration to a new destination
// at `uri`, at full speed, completes.
void runs_on_and_migrates_again(Pair& p, const std::string& uri) {
    EXPECT_EQ(p.src->status(), "running");
    uint64_t steps = p.src->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return p.src->guest_value("steps") > steps + 1; }, 60));
    ASSERT_EQ(p.src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    Pair again;
    again.uri = uri;
    again.src = std::move(p.src);
    again.pattern = p.pattern;
    again.dst = Vm::start("again-dst", {"-m", "128M", "--smp", "1", "-S", "--incoming", again.uri});
    ASSERT_TRUE(again.dst);
    expect_completed_and_same(again, again.src->cmd("migrate " + again.uri));
}

// One round's registration work, as the source traces it at the round's end.
struct RoundWork {
    uint64_t round, writes, remote_reg, local_reg, ram_chunks;
};

std::vector<RoundWork> round_work(const std::string& log) {
    static const std::regex line(
        R"(source: round (\d+) work: (\d+) chunk writes, (\d+) remote registrations, \d+ remote unregistrations, )"
        R"((\d+) local registrations, \d+ local unregistrations; \d+ chunks registered now of (\d+) in RAM)");
    std::vector<RoundWork> out;
    for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
        const auto& m = *it;
        out.push_back({std::stoull(m[1]), std::stoull(m[2]), std::stoull(m[3]), std::stoull(m[4]), std::stoull(m[5])});
    }
    return out;
}

// A SoftRoCE device of the test's own, rxe9 on dummy9 at 10.99.9.1, which it may remove and
// add again: only where VMM_RDMA_HOTPLUG=1 says the machine's RDMA devices are the tests' to
// change (the SoftRoCE nested VM). Another device (the one the other tests use) stays.
struct ScratchRxe {
    static constexpr const char* kAddr = "10.99.9.1";
    static int sh(const std::string& cmd) { return std::system(cmd.c_str()); }
    ScratchRxe() {
        made = sh("ip link add dummy9 type dummy && ip addr add 10.99.9.1/24 dev dummy9 && ip link set dummy9 up && "
                  "rdma link add rxe9 type rxe netdev dummy9") == 0;
    }
    ~ScratchRxe() { sh("rdma link delete rxe9 2>/dev/null; ip link del dummy9 2>/dev/null"); }
    bool add_again() { return sh("rdma link add rxe9 type rxe netdev dummy9") == 0; }
    // Removes rxe9 in the background; true once the removal has finished (within `seconds`).
    // The kernel finishes it only when no process holds the device open any more.
    bool remove(int seconds) {
        std::string done = ::testing::TempDir() + "rxe9-removed";
        std::filesystem::remove(done);
        sh("(rdma link delete rxe9; echo $? > " + done + ") &");
        return eventually([&] { return std::filesystem::exists(done); }, seconds);
    }
    // The processes holding a verbs device open, "NAME PID" each, for a failure message.
    static std::string device_holders() {
        std::string out;
        FILE* f = ::popen("for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null | grep -q uverbs && "
                          "echo \"$(cat $p/comm) ${p#/proc/}: $(ls -l $p/fd | grep -o 'uverbs[0-9]*.*' | tr '\\n' ' ')\"; done",
                          "r");
        if (f == nullptr) return "(cannot list)";
        char buf[256];
        while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
        ::pclose(f);
        return out;
    }
    bool made = false;
};

}  // namespace

TEST(RdmaMigration, DynamicRegistration) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_traced_pair("rdma-dyn", kPattern);  // each round's registration work is read from the trace
    ASSERT_TRUE(p.src && p.dst);
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    // Registration follows the chunks a round writes, never the size of RAM: the bulk round
    // registers what the guest populated (~9 of 128 chunks), and a chunk registered once is
    // not registered again in later rounds.
    auto work = round_work(p.src->log());
    ASSERT_GE(work.size(), 2u) << "no round work traced\n" << p.src->log();
    EXPECT_EQ(work[0].round, 0u);
    EXPECT_LT(work[0].remote_reg, work[0].ram_chunks / 4) << "the bulk round registered beyond what the guest touched";
    uint64_t registered = 0;
    for (const auto& w : work) {
        SCOPED_TRACE("round " + std::to_string(w.round));
        EXPECT_LE(w.remote_reg, w.writes);
        EXPECT_LE(w.local_reg, w.writes);
        registered += w.remote_reg;
    }
    EXPECT_LE(registered, work[0].remote_reg + 2) << "chunks were registered again in later rounds";
    // Setup in parts on both sides, the plugin's steps inside vmm's, adding up to the setup time.
    auto src = expect_setup_parts(*p.src, {"start", "connect", "header", "ram-setup"});
    if (src.size() == 4) {
        EXPECT_EQ(names_of(src[1].inner),
                  (std::vector<std::string>{"checks", "cm-id", "address", "route", "queue-pair", "buffers", "connection"}));
        EXPECT_EQ(names_of(src[3].inner), std::vector<std::string>{"blocks"});
    }
    auto dst = expect_setup_parts(*p.dst, {"accept", "header", "ram-setup"});
    if (dst.size() == 3) {
        EXPECT_EQ(names_of(dst[0].inner), (std::vector<std::string>{"queue-pair", "buffers", "connection"}));
        EXPECT_EQ(names_of(dst[2].inner), std::vector<std::string>{"blocks"});
    }
}

// verify-ram over RDMA: the core sums every page it hands the plugin and, after each round's
// writes have all completed, sends the sums over the control channel (the stream); the
// destination checks its RAM against them. The stress guest rewrites pages while the adapter
// reads them, so some arrive newer than their sums and are settled by their next copy.
TEST(RdmaMigration, VerifyRamChecksEveryPageWrittenWithoutAFalseAlarm) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    for (const char* pin_all : {"off", "on"}) {
        SCOPED_TRACE(std::string("rdma-pin-all ") + pin_all);
        auto p = start_pair(std::string("rdma-verify-") + pin_all, kStress);
        ASSERT_TRUE(p.src && p.dst);
        ASSERT_EQ(p.src->cmd("migrate_set_capability verify-ram on"), "");
        ASSERT_EQ(p.src->cmd("migrate_set_capability auto-converge on"), "");
        ASSERT_EQ(p.src->cmd(std::string("migrate_set_capability rdma-pin-all ") + pin_all), "");
        expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
        std::string info = p.dst->cmd("info migrate");
        EXPECT_FALSE(text_field(info, "verified ram").empty()) << info;
        // The sums came in SUMS messages as the writes completed and were checked while the
        // rounds ran; this much was left for the rounds' ends.
        std::string late = text_field(info, "verified after its round ended");
        EXPECT_FALSE(late.empty()) << info;
        std::cout << "verified ram: " << text_field(info, "verified ram") << "; after its round ended: " << late << "\n";
    }
}

// query-migrate is as true over RDMA as over TCP (tests/migration/stats_test.cc): `transferred`
// counts what completions vouch for, `x-in-flight` what is posted and not yet vouched for.
TEST(RdmaMigration, StatisticsAreTrueAtEverySampleOfACappedMigration) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    for (const char* pin_all : {"off", "on"}) {
        SCOPED_TRACE(std::string("rdma-pin-all ") + pin_all);
        sample_a_capped_migration({std::string("rdma-stats-") + pin_all, rdma_uri(),
                                   {std::string("migrate_set_capability rdma-pin-all ") + pin_all}});
    }
}

TEST(RdmaMigration, OverIPv6) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    if (rdma_addr6().empty()) GTEST_SKIP() << "needs an IPv6 address on the RDMA device ($VMM_RDMA_ADDR6)";
    // The URI's bracketed form, resolved and listened on by RDMA-CM as AF_INET6.
    auto p = start_pair("rdma-ipv6", kPattern, "rdma:[" + rdma_addr6() + "]:" + std::to_string(free_tcp_port()));
    ASSERT_TRUE(p.src && p.dst);
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
}

TEST(RdmaMigration, PinAll) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-pin", kStress);
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_EQ(p.src->cmd("migrate_set_capability auto-converge on"), "");
    ASSERT_EQ(p.src->cmd("migrate_set_capability rdma-pin-all on"), "");
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    // Pinning is setup's: each side's shows as its own step.
    auto src = expect_setup_parts(*p.src, {"start", "connect", "header", "ram-setup"});
    if (src.size() == 4) {
        EXPECT_EQ(names_of(src[3].inner), (std::vector<std::string>{"pin", "blocks"}));
    }
    auto dst = expect_setup_parts(*p.dst, {"accept", "header", "ram-setup"});
    if (dst.size() == 3) {
        EXPECT_EQ(names_of(dst[2].inner), (std::vector<std::string>{"pin", "blocks"}));
    }
}

TEST(RdmaMigration, DestinationToldPinAllPinsItsRamWhileItWaits) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-ahead", kStress, rdma_uri(), {}, {}, true);
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_EQ(p.src->cmd("migrate_set_capability auto-converge on"), "");
    ASSERT_EQ(p.src->cmd("migrate_set_capability rdma-pin-all on"), "");
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    EXPECT_NE(p.dst->log().find("rdma-pin-all: this side's RAM was pinned while it waited for the source"),
              std::string::npos) << p.dst->log();
    auto dst = expect_setup_parts(*p.dst, {"accept", "header", "ram-setup"});
    if (dst.size() == 3) {  // the pin step stays: it is the wait for the pinning, if still at work
        EXPECT_EQ(names_of(dst[2].inner), (std::vector<std::string>{"pin", "blocks"}));
    }
}

TEST(RdmaMigration, DestinationPinnedAheadUnpinsForADynamicSource) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-ahead-dyn", kPattern, rdma_uri(), {}, {}, true);
    ASSERT_TRUE(p.src && p.dst);
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));  // the source did not ask for rdma-pin-all
    EXPECT_NE(p.dst->log().find("dynamic registration, 1 MiB chunks, 1 channel (the RAM pinned while waiting was "
                                "unpinned: the source did not ask for rdma-pin-all)"),
              std::string::npos) << p.dst->log();
}

TEST(RdmaMigration, PinAllRegistersOnceAndNeverPerRound) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_traced_pair("rdma-pin-work", kStress);
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_EQ(p.src->cmd("migrate_set_capability auto-converge on"), "");
    ASSERT_EQ(p.src->cmd("migrate_set_capability rdma-pin-all on"), "");
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    auto work = round_work(p.src->log());
    ASSERT_GE(work.size(), 2u) << "no round work traced\n" << p.src->log();
    for (const auto& w : work) {
        SCOPED_TRACE("round " + std::to_string(w.round));
        EXPECT_EQ(w.remote_reg, 0u) << "pin-all asked the destination to register a chunk";
        EXPECT_EQ(w.local_reg, 0u) << "pin-all registers the source's RAM during setup, never in a round";
    }
    const std::string pinned = "rdma-trace: source: RAM block 'pc.ram' registered for rdma-pin-all";
    auto first = p.src->log().find(pinned);
    EXPECT_NE(first, std::string::npos) << p.src->log();
    EXPECT_EQ(p.src->log().find(pinned, first + 1), std::string::npos) << "registered more than once";
}

TEST(RdmaMigration, DestinationThatCannotPinAllRamRegistersDynamically) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    // The destination runs without CAP_IPC_LOCK (root has it) under a 64 MiB locked-memory
    // limit: its 128 MiB cannot all be pinned, so it does not grant rdma-pin-all, and the
    // source, which asked for it, registers chunk by chunk instead of failing.
    auto p = start_traced_pair("rdma-nopin", kPattern,
                               {"setpriv", "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock", "prlimit",
                                "--memlock=" + std::to_string(64 << 20)});
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_GE(p.src->guest_value("results"), 1u) << p.src->cmd("info guest");
    ASSERT_EQ(p.src->cmd("migrate_set_capability rdma-pin-all on"), "");
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    EXPECT_NE(p.dst->log().find("dynamic registration, 1 MiB chunks, 1 channel (rdma-pin-all not granted: the "
                                "locked-memory limit is 64 MiB and pinning all RAM needs 129.5 MiB"),
              std::string::npos)
        << p.dst->log();
    EXPECT_NE(p.src->log().find("dynamic registration, 1 MiB chunks, 1 channel (the destination did not grant "
                                "rdma-pin-all"),
              std::string::npos)
        << p.src->log();
    auto work = round_work(p.src->log());
    ASSERT_FALSE(work.empty()) << p.src->log();
    EXPECT_GT(work[0].remote_reg, 0u) << "the destination registered no chunk on request";
}

// The base protocol as QEMU speaks it (VMM_RDMA_BASE_PROTOCOL=1: 8-byte private data, no
// extension bit) on one side, everything on the other: the extensions each side would use
// (two channels, batched requests, sums on the RAM channel) fall away, and RAM still arrives whole.
const std::vector<std::string> kBaseProtocol{"env", "VMM_RDMA_BASE_PROTOCOL=1", "VMM_RDMA_TRACE=1"};

void migrate_with_extensions_asked(Pair& p) {
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_EQ(p.src->cmd("migrate_set_parameter rdma-channels 2"), "");
    // Without the sums extension, verify-ram's sums fall back to SUMS records on the stream.
    ASSERT_EQ(p.src->cmd("migrate_set_capability verify-ram on"), "");
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    for (Vm* vm : {p.src.get(), p.dst.get()}) {
        EXPECT_NE(vm->log().find("dynamic registration, 1 MiB chunks, 1 channel, base protocol (no vmm extension "
                                 "agreed)"),
                  std::string::npos)
            << vm->log();
    }
    std::string info = p.dst->cmd("info migrate");
    EXPECT_FALSE(text_field(info, "verified ram").empty()) << info;
    EXPECT_TRUE(text_field(info, "verified after its round ended").empty()) << info;
}

TEST(RdmaMigration, BaseProtocolSourceMigratesIntoAFullDestination) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-base-src", kPattern, rdma_uri(), {}, kBaseProtocol);
    migrate_with_extensions_asked(p);
    // One entry per request, as QEMU sends them.
    std::regex batched(R"(-> (REGISTER REQUEST|COMPRESS|UNREGISTER REQUEST) \(repeat ([2-9]|\d\d+),)");
    EXPECT_FALSE(std::regex_search(p.src->log(), batched)) << p.src->log();
    EXPECT_NE(p.src->log().find("-> REGISTER REQUEST (repeat 1,"), std::string::npos) << p.src->log();
}

TEST(RdmaMigration, FullSourceMigratesIntoABaseProtocolDestination) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-base-dst", kPattern, rdma_uri(), kBaseProtocol);
    migrate_with_extensions_asked(p);
    EXPECT_NE(p.src->log().find("(the destination takes only one channel)"),
              std::string::npos)
        << p.src->log();
}

// A destination told `settings` before it listens, as a person types them (--incoming defer,
// the settings, migrate_incoming); `wrapper` runs it (see VmmProcess::spawn).
std::unique_ptr<Vm> destination_told(const std::string& name, const std::string& uri,
                                     const std::vector<std::string>& settings,
                                     const std::vector<std::string>& wrapper = {}) {
    auto dst = Vm::start(name, {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"}, wrapper);
    if (!dst) return dst;
    for (const auto& s : settings) EXPECT_EQ(dst->cmd(s), "") << s;
    EXPECT_EQ(dst->cmd("migrate_incoming " + uri), "");
    return dst;
}

// x-rdma-chunk-size from QEMU 11.1's least to its most, registered chunk by chunk and all at
// once: the destination takes the source's size (it was told none), and both logs say it.
TEST(RdmaMigration, ChunkSizesFrom1MiBTo1GiBDynamicAndPinAll) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    for (const char* size : {"1M", "2M", "1G"}) {
        for (bool pin_all : {false, true}) {
            std::string name = std::string("rdma-chunk") + size + (pin_all ? "-pin" : "-dyn");
            SCOPED_TRACE(name);
            auto p = start_pair(name, kPattern);
            ASSERT_TRUE(p.src && p.dst);
            ASSERT_EQ(p.src->cmd(std::string("migrate_set_parameter x-rdma-chunk-size ") + size), "");
            if (pin_all) {
                ASSERT_EQ(p.src->cmd("migrate_set_capability rdma-pin-all on"), "");
            }
            expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
            std::string said = vmm::format_size(*vmm::parse_size(size)) + " chunks";
            for (Vm* vm : {p.src.get(), p.dst.get()}) EXPECT_NE(vm->log().find(said), std::string::npos) << vm->log();
        }
    }
}

// A destination told another size than its source's refuses the source in one line, before any
// rkey is sent, and waits on; the source keeps running, and migrates once told the same size.
TEST(RdmaMigration, AChunkSizeMismatchIsRefusedInOneLine) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    std::string uri = rdma_uri();
    auto src = Vm::start("rdma-chunkmis-src", {"-m", "128M", "--smp", "1", "--guest", "pattern", "--append", "bytes=8M check=64"});
    auto dst = destination_told("rdma-chunkmis-dst", uri, {"migrate_set_parameter x-rdma-chunk-size 4M"});
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-rdma-chunk-size 2M"), "");
    std::string out = src->cmd("migrate " + uri);
    EXPECT_NE(out.find("x-rdma-chunk-size: the source uses 2 MiB chunks, this destination was set to 4 MiB: set the "
                       "same on both sides"),
              std::string::npos)
        << out << src->log();
    EXPECT_EQ(src->cmd("info status"), "VM status: running\n");
    EXPECT_NE(dst->log().find("refused a connection: x-rdma-chunk-size: the source uses 2 MiB chunks"), std::string::npos)
        << dst->log();
    ASSERT_EQ(src->cmd("migrate_set_parameter x-rdma-chunk-size 4M"), "");
    out = src->cmd("migrate " + uri);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    EXPECT_EQ(src->ramhash(), dst->ramhash());
}

// QEMU's rule where the peer cannot say its size (QEMU, or the base protocol): each side uses the
// size it was told, the same at both ends; the source says the destination must have it too.
TEST(RdmaMigration, ABaseProtocolPeerUsesTheChunkSizeEachSideWasTold) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    std::string uri = rdma_uri();
    auto src = Vm::start("rdma-chunkbase-src", {"-m", "128M", "--smp", "1", "--guest", "pattern", "--append", "bytes=8M check=64"});
    auto dst = destination_told("rdma-chunkbase-dst", uri, {"migrate_set_parameter x-rdma-chunk-size 2M"}, kBaseProtocol);
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-rdma-chunk-size 2M"), "");
    std::string out = src->cmd("migrate " + uri);
    ASSERT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log() << dst->log();
    EXPECT_EQ(src->ramhash(), dst->ramhash());
    EXPECT_NE(src->log().find("the destination cannot agree a chunk size (QEMU): x-rdma-chunk-size must be 2 MiB there too"),
              std::string::npos)
        << src->log();
    EXPECT_NE(dst->log().find("2 MiB chunks, 1 channel, base protocol"), std::string::npos) << dst->log();
}

TEST(RdmaMigration, SmallPinLimitForcesUnregisterTraffic) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_traced_pair("rdma-limit", kPattern);  // the source logs each (un)registration
    ASSERT_TRUE(p.src && p.dst);
    // 2 MiB of 1 MiB chunks registered at a time: the ~10 MiB the guest touched cannot all be
    // pinned, so the least recently used chunks must be unregistered on the way.
    ASSERT_EQ(p.src->cmd("migrate_set_parameter rdma-pin-limit 2M"), "");
    expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    EXPECT_NE(p.src->log().find("rdma-trace: source: unregister remote chunk"), std::string::npos)
        << "no Unregister request was sent";
    EXPECT_NE(p.dst->log().find("rdma-trace: destination: chunk 0:9 registered"), std::string::npos)
        << "the destination never registered chunk 9 (the guest's data at 4..12 MiB)";
}

TEST(RdmaMigration, TwoChannels) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    // Chunks striped over two queue pairs: dynamic registration with unregistration on the way
    // (the pin limit), then pin-all.
    for (const char* mode : {"rdma-pin-limit", "rdma-pin-all"}) {
        SCOPED_TRACE(mode);
        auto p = start_pair(std::string("rdma-2ch-") + mode, kPattern);
        ASSERT_TRUE(p.src && p.dst);
        ASSERT_EQ(p.src->cmd("migrate_set_parameter rdma-channels 2"), "");
        if (std::string(mode) == "rdma-pin-all") ASSERT_EQ(p.src->cmd("migrate_set_capability rdma-pin-all on"), "");
        else ASSERT_EQ(p.src->cmd("migrate_set_parameter rdma-pin-limit 4M"), "");
        expect_completed_and_same(p, p.src->cmd("migrate " + p.uri));
    }
}

TEST(RdmaMigration, ZeroHeavyGuest) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    // 16 MiB: under the nested VM's emulated KVM each first touch of a dropped zero page is a
    // slow fault, and the guest must show progress soon after it moves.
    auto p = start_pair("rdma-zero", {"--guest", "stress", "--append", "bytes=16M zero=1"});
    ASSERT_TRUE(p.src && p.dst);
    std::string out = p.src->cmd("migrate " + p.uri);
    expect_completed_and_same(p, out);
    // 16 MiB of zero pages travelled as COMPRESS markers, not data.
    EXPECT_GE(std::stoull("0" + p.src->migrate_field("duplicate")), 4000u) << out;
}

TEST(RdmaMigration, AnotherProtocolVersionIsRefusedClearly) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    ::setenv("VMM_RDMA_ANNOUNCE_VERSION", "2", 1);  // the source announces version 2
    auto p = start_pair("rdma-version", {"--guest", "idle"});
    ::unsetenv("VMM_RDMA_ANNOUNCE_VERSION");
    ASSERT_TRUE(p.src && p.dst);
    std::string out = p.src->cmd("migrate " + p.uri);
    EXPECT_NE(out.find("Migration status: failed"), std::string::npos) << out;
    // The destination's own reason, carried in the reject.
    EXPECT_NE(out.find("the destination refused: the peer speaks RDMA migration protocol version 2, this vmm version 1"),
              std::string::npos) << out;
    EXPECT_EQ(p.src->status(), "running");
    p.dst->forget_monitor();
    EXPECT_EQ(p.dst->process().wait(std::chrono::seconds(60)), std::optional<int>(1));
    EXPECT_NE(p.dst->log().find("the peer speaks RDMA migration protocol version 2, this vmm version 1"), std::string::npos)
        << p.dst->log();
}

// migrate_cancel while RDMA writes are on the wire: the source cancels at once (nothing waits
// for the writes), runs on, and migrates again; the destination gives up.
TEST(RdmaMigration, CancelMidwaySourceRunsOnAndMigratesAgain) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-cancel", {"--guest", "pattern", "--append", "bytes=16M check=64"});
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_TRUE(migrating_slowly(p)) << p.src->cmd("info migrate");
    EXPECT_EQ(p.src->cmd("migrate_cancel"), "");
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "cancelled"; }, 30)) << p.src->cmd("info migrate");
    p.dst->forget_monitor();
    EXPECT_EQ(p.dst->process().wait(std::chrono::seconds(60)), std::optional<int>(1)) << p.dst->log();
    runs_on_and_migrates_again(p, rdma_uri());
}

// A second source knocking while a migration runs is turned away with the destination's own
// reason, and the migration under way completes.
TEST(RdmaMigration, SecondSourceIsRefusedWithTheDestinationsReason) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-busy", {"--guest", "pattern", "--append", "bytes=16M check=64"});
    auto intruder = Vm::start("rdma-busy-src2", {"-m", "128M", "--smp", "1", "--guest", "idle"});
    ASSERT_TRUE(p.src && p.dst && intruder);
    ASSERT_TRUE(migrating_slowly(p)) << p.src->cmd("info migrate");
    std::string out = intruder->cmd("migrate " + p.uri);
    EXPECT_NE(out.find("Migration status: failed"), std::string::npos) << out;
    EXPECT_NE(text_field(out, "error").find("the destination refused: a migration is in progress"), std::string::npos) << out;
    EXPECT_EQ(intruder->status(), "running");
    ASSERT_EQ(p.src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "completed"; }, 120)) << p.src->cmd("info migrate");
    expect_completed_and_same(p, p.src->cmd("info migrate"));
}

// Destinations that cannot be reached: each fails with one line that says what to fix, and
// the source runs on.
TEST(RdmaMigration, UnreachableDestinationsFailWithAClearLine) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto src = Vm::start("rdma-bad-src", {"-m", "64M", "--smp", "1", "--guest", "idle"});
    ASSERT_TRUE(src);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-connect-timeout 3000"), "");
    const std::vector<std::pair<std::string, std::string>> cases{
        {rdma_uri(), "nothing listens there; start the destination with --incoming rdma:HOST:PORT first"},
        {"rdma:192.0.2.1:4444", "192.0.2.1"},  // TEST-NET-1: no RDMA device reaches it
        {"rdma:nosuchhost.invalid:4444", "cannot resolve 'nosuchhost.invalid'"},
    };
    for (const auto& [uri, says] : cases) {
        std::string out = src->cmd("migrate " + uri);
        EXPECT_NE(out.find("Migration status: failed"), std::string::npos) << uri << "\n" << out;
        std::string line = text_field(out, "error");
        EXPECT_NE(line.find(says), std::string::npos) << uri << "\n" << out;
        EXPECT_EQ(line.find('\n'), std::string::npos);
        EXPECT_EQ(src->status(), "running");
    }
}

TEST(RdmaMigration, DestinationKilledMidwaySourceRunsOnAndMigratesAgain) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    auto p = start_pair("rdma-kill", {"--guest", "pattern", "--append", "bytes=16M check=64"});
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_TRUE(migrating_slowly(p)) << p.src->cmd("info migrate");
    p.dst->forget_monitor();
    p.dst->process().signal(SIGKILL);
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "failed"; }, 120)) << p.src->cmd("info migrate");
    runs_on_and_migrates_again(p, rdma_uri());
}

// The device goes away mid-migration: both sides abort with RDMA_CM_EVENT_DEVICE_REMOVAL, the
// source runs on and lets go of the device, so the removal completes while it runs (SoftRoCE
// cannot take a device from a process: the kernel waits for every user to close it). Once the
// device is back, the same source migrates over it.
TEST(RdmaMigration, DeviceRemovedMidwaySourceRunsOnLetsGoAndMigratesAgain) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    if (std::getenv("VMM_RDMA_HOTPLUG") == nullptr)
        GTEST_SKIP() << "needs RDMA devices the test may add and remove (VMM_RDMA_HOTPLUG=1, as in the SoftRoCE VM: "
                        "scripts/softroce-run.sh ctest --test-dir build -L rdma)";
    ScratchRxe rxe;
    ASSERT_TRUE(rxe.made) << "could not make rxe9 on dummy9";
    auto uri = [] { return std::string("rdma:") + ScratchRxe::kAddr + ":" + std::to_string(free_tcp_port()); };
    auto p = start_pair("rdma-unplug", {"--guest", "pattern", "--append", "bytes=16M check=64"}, uri());
    ASSERT_TRUE(p.src && p.dst);
    ASSERT_TRUE(migrating_slowly(p)) << p.src->cmd("info migrate");
    p.dst->forget_monitor();
    EXPECT_TRUE(rxe.remove(30)) << "removing rxe9 did not finish: a process still holds it open:\n"
                                << ScratchRxe::device_holders() << "source: " << p.src->process().pid() << "\n"
                                << p.src->log();
    ASSERT_TRUE(eventually([&] { return p.src->migrate_status() == "failed"; }, 60)) << p.src->cmd("info migrate");
    EXPECT_NE(p.src->log().find("RDMA_CM_EVENT_DEVICE_REMOVAL"), std::string::npos) << p.src->log();
    EXPECT_EQ(p.dst->process().wait(std::chrono::seconds(60)), std::optional<int>(1));
    EXPECT_NE(p.dst->log().find("RDMA_CM_EVENT_DEVICE_REMOVAL"), std::string::npos) << p.dst->log();
    ASSERT_TRUE(rxe.add_again());
    runs_on_and_migrates_again(p, uri());
}

}  // namespace vmm::test
