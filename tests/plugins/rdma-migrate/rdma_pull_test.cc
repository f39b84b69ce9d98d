// Clones that pull a served saved guest (x-pull-serve FILE rdma:HOST:PORT on one vmm, vmm
// --incoming rdma-pull:HOST:PORT on others), through the real vmm binary on a real RDMA device
// (label rdma): each clone runs at once and ends with the saver's RAM, several at once, and the
// server's monitor says who pulled how much.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "rdma_device.h"
#include "tests/support/kvm_fixture.h"
#include "tests/support/require.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

namespace {

const std::vector<std::string> kGuest{"--guest", "pattern", "-m", "64M", "--smp", "1", "--append", "bytes=8M check=64"};

// A pattern guest, run until its first check and saved into `path`: `stopped`, paused first (its
// clones start paused, and the saver's RAM digest stays the save's), else while it runs (its
// clones run at once; the saver runs on). Returns the saver, or null.
std::unique_ptr<Vm> saved_guest(const std::string& name, const std::string& path, bool stopped,
                                const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = kGuest;
    args.insert(args.end(), more.begin(), more.end());
    auto src = Vm::start(name, args);
    if (!src) return nullptr;
    EXPECT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 120)) << src->cmd("info guest");
    if (stopped) {
        EXPECT_EQ(src->cmd("stop"), "");
    }
    std::string out = src->cmd("migrate file:" + path);
    EXPECT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    return src;
}

// A clone of what `uri` serves; `paused`: with -S (its RAM can be compared with the saver's: a
// running guest changes its own).
std::unique_ptr<Vm> clone(const std::string& name, const std::string& uri, bool paused = false) {
    std::vector<std::string> args{"-m", "64M", "--smp", "1", "--incoming", "rdma-pull:" + uri.substr(5)};
    if (paused) args.push_back("-S");
    return Vm::start(name, args);
}

// Once every page is in: the clone's RAM is the saver's (paused, as the save left it), and it
// runs on with its own check clean.
void expect_whole_and_running(Vm& c, const std::string& hash) {
    ASSERT_TRUE(eventually([&] { return c.migrate_status() == "completed"; }, 300)) << c.cmd("info migrate") << c.log();
    EXPECT_NE(c.log().find("every page is in (lazy restore)"), std::string::npos) << c.log();
    EXPECT_EQ(c.ramhash(), hash);
    uint64_t results = c.guest_value("results");
    ASSERT_EQ(c.cmd("cont"), "");
    EXPECT_TRUE(eventually([&] { return c.guest_value("results") > results; }, 120)) << c.cmd("info guest");
    EXPECT_EQ(c.guest_value("errors"), 0u) << c.cmd("info guest");
}

// The clones the server's 'info pull-clients' lists as done, eventually `n` (within 30 s).
bool eventually_done(Vm& server, size_t n, std::string& served) {
    return eventually([&] {
        served = server.cmd("info pull-clients");
        size_t done = 0;
        for (size_t at = served.find(" done "); at != std::string::npos; at = served.find(" done ", at + 1)) ++done;
        return done == n;
    }, 30);
}

}  // namespace

// One clone of a guest saved while it ran: it runs before its RAM is in, its own check passes on
// pages pulled as it touches them, every page comes in, and the server saw it pull and say it
// was done. (Its RAM is compared with the saver's in the next test, whose save is paused.)
TEST(RdmaPull, ACloneRunsAtOnceAndPullsWhatItTouches) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    std::string path = temp_path("pull-one.save");
    auto src = saved_guest("pull-one-src", path, false);
    ASSERT_TRUE(src);
    std::string uri = rdma_uri();
    ASSERT_EQ(src->cmd("x_pull_serve " + path + " " + uri), "") << src->log();
    auto c = clone("pull-one-clone", uri);
    ASSERT_TRUE(c);
    // It runs before its pages are in, its own check passing on pages pulled as it touches them.
    ASSERT_TRUE(eventually([&] { return c->status() == "running"; }, 60)) << c->status() << c->log();
    uint64_t results = c->guest_value("results");
    EXPECT_TRUE(eventually([&] { return c->guest_value("results") > results; }, 120)) << c->cmd("info guest");
    ASSERT_TRUE(eventually([&] { return c->migrate_status() == "completed"; }, 240)) << c->cmd("info migrate") << c->log();
    EXPECT_NE(c->log().find("every page is in (lazy restore)"), std::string::npos) << c->log();
    EXPECT_EQ(c->guest_value("errors"), 0u) << c->cmd("info guest");
    std::string info = c->cmd("info migrate");
    std::cout << "clone: " << text_field(info, "lazy restore ready") << " to run; faults "
              << text_field(info, "postcopy requests") << ", " << text_field(info, "postcopy fault latency") << "\n";
    c.reset();  // gone, having said it was done
    std::string served;
    EXPECT_TRUE(eventually_done(*src, 1, served)) << served;
    std::cout << served;
    EXPECT_EQ(src->cmd("x_pull_serve_stop"), "");
    EXPECT_NE(src->cmd("info pull-clients").find("serving no saved guest"), std::string::npos);
    std::filesystem::remove(path);
}

// Four clones of a guest saved paused pull from one server at once: each ends whole with the
// saver's RAM, then runs with its own check clean, and the server lists four, each done.
TEST(RdmaPull, FourClonesPullFromOneServerAtOnce) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    std::string path = temp_path("pull-four.save");
    auto src = saved_guest("pull-four-src", path, true);
    ASSERT_TRUE(src);
    std::string uri = rdma_uri();
    ASSERT_EQ(src->cmd("x_pull_serve " + path + " " + uri), "") << src->log();
    std::vector<std::unique_ptr<Vm>> clones;
    for (int i = 0; i < 4; ++i) {
        clones.push_back(clone("pull-four-" + std::to_string(i), uri, true));
        ASSERT_TRUE(clones.back());
    }
    std::string hash = src->ramhash();
    for (auto& c : clones) expect_whole_and_running(*c, hash);
    clones.clear();
    std::string served;
    EXPECT_TRUE(eventually_done(*src, 4, served)) << served;
    std::cout << served;
    std::filesystem::remove(path);
}

// The server stops serving while a clone pulls: the clone ends (it cannot run on without its
// pages), its last line naming the server; the server runs on, serving nothing.
TEST(RdmaPull, AServerThatStopsServingEndsItsPullingCloneInOneLine) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    std::string path = temp_path("pull-stop.save");
    // 48 MiB of random bytes to pull: seconds over SoftRoCE, long enough to stop in the middle.
    auto src = saved_guest("pull-stop-src", path, true, {"--prefill", "48M"});
    ASSERT_TRUE(src);
    std::string uri = rdma_uri();
    ASSERT_EQ(src->cmd("x_pull_serve " + path + " " + uri), "");
    auto c = clone("pull-stop-clone", uri, true);
    ASSERT_TRUE(c);
    ASSERT_TRUE(eventually([&] { return src->cmd("info pull-clients").find(" pulling ") != std::string::npos; }, 60))
        << src->cmd("info pull-clients");
    ASSERT_EQ(src->cmd("x_pull_serve_stop"), "");
    auto ended = c->process().wait(std::chrono::seconds(60));
    ASSERT_TRUE(ended.has_value()) << "the clone ran on without its server: " << c->cmd("info migrate");
    EXPECT_NE(*ended, 0);
    std::string log = c->log();
    size_t last = log.rfind("vmm: ", log.size() - 2);
    std::cout << log.substr(last == std::string::npos ? 0 : last);
    EXPECT_NE(log.find("rdma-pull:" + uri.substr(5) + ": the server's connection ended"), std::string::npos) << log;
    EXPECT_EQ(src->cmd("info status"), "VM status: paused\n");
    EXPECT_NE(src->cmd("info pull-clients").find("serving no saved guest"), std::string::npos);
    std::filesystem::remove(path);
}

// What cannot work is one line: serving what is not a save, or over a transport that cannot,
// serving twice, a clone whose shape is not the save's, a clone that reaches a migration
// destination (which waits on), and a clone asked to map what is on another host.
TEST(RdmaPull, WrongUsesAreRefusedInOneLine) {
    VMM_REQUIRE(need::kvm(), need::rdma());
    std::string path = temp_path("pull-wrong.save");
    auto src = saved_guest("pull-wrong-src", path, true);
    ASSERT_TRUE(src);
    EXPECT_NE(src->cmd("x_pull_serve /etc/hostname " + rdma_uri()).find("too short to be a saved guest"), std::string::npos);
    EXPECT_NE(src->cmd("x_pull_serve " + path + " tcp:127.0.0.1:1").find("cannot serve a saved guest"), std::string::npos);
    std::string uri = rdma_uri();
    ASSERT_EQ(src->cmd("x_pull_serve " + path + " " + uri), "");
    EXPECT_NE(src->cmd("x_pull_serve " + path + " " + rdma_uri()).find("serves file:"), std::string::npos);
    auto other = Vm::start("pull-wrong-128", {"-m", "128M", "--smp", "1", "--incoming", "defer"});
    ASSERT_TRUE(other);
    EXPECT_NE(other->cmd("migrate_incoming rdma-pull:" + uri.substr(5)).find("start vmm with the saved guest's memory"),
              std::string::npos);
    // A clone that reaches an RDMA migration destination is refused there, which waits on.
    std::string mig = rdma_uri();
    auto waiting = Vm::start("pull-wrong-dst", {"-m", "64M", "--smp", "1", "--incoming", mig});
    ASSERT_TRUE(waiting);
    auto stray = Vm::start("pull-wrong-stray", {"-m", "64M", "--smp", "1", "--incoming", "defer"});
    ASSERT_TRUE(stray);
    EXPECT_NE(stray->cmd("migrate_incoming rdma-pull:" + mig.substr(5)).find("a clone asked to pull"), std::string::npos);
    EXPECT_TRUE(eventually([&] { return waiting->log().find("still waiting for the migration source") != std::string::npos; }, 30))
        << waiting->log();
    auto mapped = Vm::start("pull-wrong-mapped", {"-m", "64M", "--smp", "1", "--incoming", "defer"});
    ASSERT_TRUE(mapped);
    EXPECT_EQ(mapped->cmd("migrate_set_capability x-restore-mapped on"), "");
    std::string out = mapped->cmd("migrate_incoming rdma-pull:" + uri.substr(5));
    std::cout << out;
    EXPECT_TRUE(eventually([&] { return mapped->log().find("x-restore-mapped maps a local file") != std::string::npos; }, 30))
        << out << mapped->log();
    std::filesystem::remove(path);
}

}  // namespace vmm::test
