// A precopy whose link breaks (x-resume-window): both sides wait in precopy-paused, the guest
// runs on at the source, and when a way to the destination is back the migration goes on from
// where it was, sending only what did not arrive. The link is cut by a forwarder neither vmm
// knows about; past the window, or towards a destination that is not this migration's, it fails
// with the source running.
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

// A source whose guest keeps writing (2 MiB) beside 96 MiB the host filled, migrated at 32 MB/s
// (about 3 s of bulk round) through `link`.
std::unique_ptr<Vm> filled_source(const std::string& name) {
    return Vm::start(name, {"--guest", "stress", "-m", "256M", "--smp", "1", "--prefill", "96M", "--append",
                            "bytes=" + sized("2M", "512K")});
}

uint64_t transferred_kb(Vm& vm) {
    std::string v = vm.migrate_field("transferred ram");
    return v.empty() ? 0 : std::stoull(v);
}

void start_through(Vm& src, TcpProxy& link, const std::string& window = "") {
    if (!window.empty()) {
        ASSERT_EQ(src.cmd("migrate_set_parameter x-resume-window " + window), "");
    }
    ASSERT_EQ(src.cmd("migrate_set_parameter max-bandwidth 32m"), "");
    ASSERT_EQ(src.cmd("migrate -d " + tcp_uri(link.port())), "");
    // Cut in the bulk round, with a good part of it sent.
    ASSERT_TRUE(eventually([&] { return transferred_kb(src) > 24 * 1024; }, 60)) << src.cmd("info migrate");
}

void expect_both_paused(Vm& src, Vm& dst) {
    ASSERT_TRUE(eventually([&] { return src.migrate_status() == "precopy-paused"; }, 30)) << src.cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "precopy-paused"; }, 30)) << dst.cmd("info migrate");
}

// A migration of filled_source() to a -S destination through a forwarder, cut in its bulk
// round: both sides precopy-paused when it returns (check with ASSERT_NO_FATAL_FAILURE).
struct PausedPair {
    uint16_t port = 0;
    std::unique_ptr<Vm> src, dst;
    std::unique_ptr<TcpProxy> link;
};

void pause_a_pair(PausedPair& p, const std::string& name, const std::string& window = "") {
    p.port = free_tcp_port();
    p.src = filled_source(name + "-src");
    p.dst = destination(name + "-dst", tcp_uri(p.port), "256M", "1");
    ASSERT_TRUE(p.src && p.dst);
    p.link = std::make_unique<TcpProxy>(p.port);
    start_through(*p.src, *p.link, window);
    p.link->cut();
    if (window.empty()) expect_both_paused(*p.src, *p.dst);
}

void expect_completed(Vm& src, Vm& dst) {
    ASSERT_TRUE(eventually([&] { return src.migrate_status() == "completed"; }, 120)) << src.cmd("info migrate") << src.log();
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "completed"; }, 30)) << dst.cmd("info migrate") << dst.log();
}

// What a vmm source of this destination's shape sends first when it resumes session `id`.
std::vector<uint8_t> resuming_header(uint64_t id, uint32_t features) {
    migration::StreamHeader h;
    h.vcpu_count = 1;
    h.blocks = {{"pc.ram", 0, 256u << 20}};
    h.features = features;
    auto bytes = migration::encode_header(h);
    migration::Record r;
    r.type = migration::RecordType::session;
    r.session = id;
    r.window_ms = 30000;
    auto session = migration::encode_record(r);
    bytes.insert(bytes.end(), session.begin(), session.end());
    return bytes;
}

}  // namespace

// Cut for a second in the bulk round: both pause, the guest runs on at the source, and when the
// link is back the migration completes with the same RAM on both sides, having sent little more
// than the guest's RAM once.
TEST(PrecopyResume, ALinkCutForASecondResumesAndWhatArrivedIsNotSentAgain) {
    VMM_REQUIRE(need::kvm());
    PausedPair p;
    ASSERT_NO_FATAL_FAILURE(pause_a_pair(p, "pr-cut"));
    auto& [port, src, dst, link] = p;
    EXPECT_NE(src->migrate_field("error").find("broke"), std::string::npos) << src->cmd("info migrate");
    uint64_t steps = src->guest_value("steps");
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 30)) << "the guest stopped while paused";
    EXPECT_EQ(src->status(), "running");
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the outage: a second
    link->mend();
    expect_completed(*src, *dst);
    std::string resumes = src->migrate_field("precopy resumes");  // "1 (paused N ms in all; …)"
    EXPECT_EQ(resumes.substr(0, 2), "1 ") << src->cmd("info migrate");
    EXPECT_GE(std::stoull(resumes.substr(resumes.find("paused ") + 7)), 1000u) << resumes;
    EXPECT_EQ(dst->migrate_field("precopy resumes").substr(0, 2), "1 ") << dst->cmd("info migrate");
    // The 96 MiB filled, the payload and what the guest rewrote: nothing sent twice but what was
    // in flight when the link broke.
    EXPECT_LT(transferred_kb(*src), 110u * 1024) << src->cmd("info migrate");
    expect_handover(*src, *dst);
}

// Over TLS the resumption is a new TLS session, both sides authenticated again, and the
// migration completes as over plain tcp.
TEST(PrecopyResume, OverTlsTheNewConnectionIsAuthenticatedAgain) {
    VMM_REQUIRE(need::kvm(), need::certtool());
    TestPki pki("vmm-resume-test");
    std::string creds = pki.make("good");
    ASSERT_FALSE(creds.empty()) << "make-test-pki.sh failed";
    uint16_t port = free_tcp_port();
    auto src = filled_source("pr-tls-src");
    auto dst = destination("pr-tls-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(dst->cmd("migrate_set_parameter tls-creds " + creds), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter tls-creds " + creds), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter tls-hostname localhost"), "");
    TcpProxy link(port);
    start_through(*src, link);
    link.cut();
    expect_both_paused(*src, *dst);
    link.mend();
    expect_completed(*src, *dst);
    EXPECT_EQ(src->migrate_field("precopy resumes").substr(0, 2), "1 ") << src->cmd("info migrate");
    expect_handover(*src, *dst);
}

// Past x-resume-window the migration fails as it always did: the source says why and runs on,
// the destination gives up at the source's window.
TEST(PrecopyResume, PastTheWindowItFailsAndTheGuestRunsOnAtTheSource) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = filled_source("pr-long-src");
    auto dst = destination("pr-long-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(dst->cmd("migrate_set_parameter x-connect-timeout " + short_connect_timeout()), "");
    TcpProxy link(port);
    start_through(*src, link, "1500");
    link.cut();
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "failed"; }, 30)) << src->cmd("info migrate");
    EXPECT_NE(src->migrate_field("error").find("x-resume-window (1500 ms)"), std::string::npos) << src->cmd("info migrate");
    EXPECT_EQ(src->status(), "running");
    uint64_t steps = src->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 30));
    dst->forget_monitor();
    EXPECT_EQ(dst->process().wait(std::chrono::seconds(30)), std::optional<int>(1)) << dst->log();
    EXPECT_NE(dst->log().find("did not resume within"), std::string::npos) << dst->log();
}

// The way through the forwarder stays down; 'migrate -r' names another (straight to the
// destination), and the resume, in the foreground, follows the migration to its end.
TEST(PrecopyResume, MigrateRNamesAnotherWayAndFollowsItToTheEnd) {
    VMM_REQUIRE(need::kvm());
    PausedPair p;
    ASSERT_NO_FATAL_FAILURE(pause_a_pair(p, "pr-r"));
    auto& [port, src, dst, link] = p;
    EXPECT_NE(src->cmd("migrate_start_postcopy").find("cannot switch"), std::string::npos);
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    std::string out = src->cmd("migrate -r " + tcp_uri(port));
    EXPECT_NE(out.find("Migration status: completed"), std::string::npos) << out << src->log();
    EXPECT_NE(out.find("precopy resumes: 1"), std::string::npos) << out;
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate");
    expect_handover(*src, *dst);
}

// While the destination waits, a connection that is not its source's resumption is refused in
// one line and the wait goes on: a new migration, another migration's resumption. Then the real
// source comes back and completes.
TEST(PrecopyResume, OnlyThisMigrationsSourceMayResumeIt) {
    VMM_REQUIRE(need::kvm());
    PausedPair p;
    ASSERT_NO_FATAL_FAILURE(pause_a_pair(p, "pr-other"));
    auto& [port, src, dst, link] = p;
    std::string fresh = send_and_read(port, resuming_header(0, 0));
    EXPECT_NE(fresh.find("waits for its source to resume it"), std::string::npos) << fresh;
    std::string other = send_and_read(port, resuming_header(0x1234, migration::kFeatureResumable | migration::kFeaturePrecopyResume));
    EXPECT_NE(other.find("another migration"), std::string::npos) << other;
    EXPECT_EQ(dst->migrate_status(), "precopy-paused");
    // The source sent to a vmm that waits for a new migration: refused there, said, and the
    // migration stays paused for its own way back.
    uint16_t elsewhere = free_tcp_port();
    auto stranger = destination("pr-other-stranger", tcp_uri(elsewhere), "256M", "1");
    ASSERT_TRUE(stranger);
    EXPECT_EQ(src->cmd("migrate -d -r " + tcp_uri(elsewhere)), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_field("error").find("did not resume it") != std::string::npos; }, 30))
        << src->cmd("info migrate");
    EXPECT_NE(src->migrate_field("error").find("this destination has none"), std::string::npos) << src->cmd("info migrate");
    EXPECT_EQ(src->migrate_status(), "precopy-paused");
    link->mend();
    expect_completed(*src, *dst);
    expect_handover(*src, *dst);
}

// A destination restarted while the link was down holds none of the pages: the source's
// resumption is refused there, and the migration fails at once with the source running.
TEST(PrecopyResume, ARestartedDestinationRefusesTheResumption) {
    VMM_REQUIRE(need::kvm());
    PausedPair p;
    ASSERT_NO_FATAL_FAILURE(pause_a_pair(p, "pr-restart"));
    auto& [port, src, dst, link] = p;
    dst->forget_monitor();
    dst->process().signal(SIGKILL);
    (void)dst->process().wait(std::chrono::seconds(30));
    auto again = destination("pr-restart-dst2", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(again);
    link->mend();
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "failed"; }, 30)) << src->cmd("info migrate");
    EXPECT_NE(src->migrate_field("error").find("this destination has none"), std::string::npos) << src->cmd("info migrate");
    EXPECT_EQ(src->status(), "running");
}

// Cancelled on a healthy link: the destination sees the link end as a break, and would wait for
// the source's window; the source says goodbye on a new connection, so it ends at once.
TEST(PrecopyResume, ACancelEndsTheWaitingDestinationAtOnce) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = filled_source("pr-cancel-src");
    auto dst = destination("pr-cancel-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-resume-window 600000"), "");  // only the goodbye ends the wait in time
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 32m"), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    ASSERT_TRUE(eventually([&] { return transferred_kb(*src) > 8 * 1024; }, 60)) << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("migrate_cancel"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "cancelled"; }, 30)) << src->cmd("info migrate");
    EXPECT_EQ(src->status(), "running");
    dst->forget_monitor();
    EXPECT_EQ(dst->process().wait(std::chrono::seconds(30)), std::optional<int>(1)) << dst->log();
    EXPECT_NE(dst->log().find("the source ended the migration"), std::string::npos) << dst->log();
}

// The switchover as a commit: the link cut at each step of the hand-over, from either side
// (x-switchover-cut: 1 after STATE, 2 after READY, 3 after GO, 4 after RUNNING). Each time the
// migration completes with the guest in exactly one place: the source postmigrate, the
// destination holding the source's RAM, ready to run.
TEST(PrecopyResume, TheSwitchoverCutAtEachStepEndsWithOneCopy) {
    VMM_REQUIRE(need::kvm());
    const std::vector<std::pair<std::string, int>> cuts = {{"src", 1}, {"src", 2}, {"src", 3}, {"src", 4},
                                                           {"dst", 2}, {"dst", 3}, {"dst", 4}};
    for (const auto& [side, step] : cuts) ASSERT_NO_FATAL_FAILURE(expect_one_copy_after_a_cut(side, step));
}

// In doubt past the window: GO went and the link broke before the destination's RUNNING came,
// and the way back to the destination stays down (the forwarder closes every new connection).
// The source keeps its copy paused and says how to tell which side to run; the destination runs
// the guest: never two copies.
TEST(PrecopyResume, InDoubtAfterGoTheSourceKeepsItsCopyPausedAndSaysWhatToCheck) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = filled_source("pr-doubt-src");
    auto dst = Vm::start("pr-doubt-dst", {"-m", "256M", "--smp", "1", "--incoming", tcp_uri(port)});  // runs at GO
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(dst->cmd("migrate_set_parameter x-switchover-cut 3"), "");  // GO read, the guest run, then cut
    ASSERT_EQ(dst->cmd("migrate_set_parameter x-connect-timeout " + short_connect_timeout()), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter x-resume-window 1500"), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter x-connect-timeout " + short_connect_timeout()), "");
    TcpProxy link(port);
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(link.port())), "");
    ASSERT_TRUE(eventually([&] { return link.connections() == 1; }, 30));
    link.refuse_new();
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "failed"; }, 60)) << src->cmd("info migrate") << src->log();
    std::string error = src->migrate_field("error");
    EXPECT_NE(error.find("did not say within x-resume-window (1500 ms) whether it runs the guest"), std::string::npos)
        << error;
    EXPECT_NE(error.find("only if it does not, 'cont -f' here runs it"), std::string::npos) << error;
    EXPECT_EQ(src->status(), "paused");
    EXPECT_NE(src->cmd("cont").find("'cont -f'"), std::string::npos);
    EXPECT_EQ(src->status(), "paused");
    ASSERT_TRUE(eventually([&] { return dst->status() == "running"; }, 30)) << dst->log();
    uint64_t steps = dst->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 1; }, 30)) << "the guest does not run there";
}

}  // namespace vmm::test

namespace vmm::test {

// x-fallback-uri: the migration's own way stays down (the forwarder closes every new
// connection), the destination listens on a second way too (migrate_recover while it runs), and
// after two seconds the source's tries alternate and the second way takes the rest from where it
// stopped. The statistics say how much went each way.
TEST(PrecopyResume, AFallbackUriTakesTheRestWhenItsOwnWayStaysDown) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = filled_source("pr-fb-src");
    auto dst = destination("pr-fb-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    std::string other = "unix:" + ::testing::TempDir() + "pr-fb-" + std::to_string(::getpid()) + ".sock";
    TcpProxy link(port);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-fallback-uri " + other), "");
    start_through(*src, link);
    ASSERT_EQ(dst->cmd("migrate_recover " + other), "");  // while it runs: a second way in
    link.cut();
    link.refuse_new();
    expect_completed(*src, *dst);
    std::string ways = src->migrate_field("ways");
    EXPECT_NE(ways.find(tcp_uri(link.port()) + " "), std::string::npos) << src->cmd("info migrate");
    EXPECT_NE(ways.find(", then " + other + " "), std::string::npos) << src->cmd("info migrate");
    EXPECT_NE(dst->log().find("may come on " + other + " too"), std::string::npos) << dst->log();
    EXPECT_LT(number(*src, "transferred ram"), 110u * 1024) << src->cmd("info migrate");
    expect_handover(*src, *dst);
}

// What cannot be a fallback is refused in one line, before anything moves; migrate_recover on a
// precopy that does not resume says so.
TEST(PrecopyResume, BadFallbacksAreRefusedInOneLine) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto src = filled_source("pr-fbbad-src");
    auto dst = destination("pr-fbbad-dst", tcp_uri(port), "256M", "1");
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-fallback-uri file:/tmp/x"), "");
    std::string out = src->cmd("migrate " + tcp_uri(port));
    EXPECT_NE(out.find("a fallback is another way to the same destination"), std::string::npos) << out;
    ASSERT_EQ(src->cmd("migrate_set_parameter x-fallback-uri nosuch:1.2.3.4:5"), "");
    EXPECT_NE(src->cmd("migrate " + tcp_uri(port)).find("x-fallback-uri"), std::string::npos);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-fallback-uri tcp:127.0.0.1:1"), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter x-resume-window 0"), "");
    out = src->cmd("migrate " + tcp_uri(port));
    EXPECT_NE(out.find("set x-resume-window above 0 too"), std::string::npos) << out;
    EXPECT_EQ(src->status(), "running");
    // The window off: the precopy does not resume, and its destination says so to migrate_recover.
    ASSERT_EQ(src->cmd("migrate_set_parameter x-fallback-uri \"\""), "");
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 16m"), "");
    ASSERT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "active"; }, 60)) << dst->cmd("info migrate");
    out = dst->cmd("migrate_recover " + tcp_uri(free_tcp_port()));
    EXPECT_NE(out.find("does not resume"), std::string::npos) << out;
    ASSERT_EQ(src->cmd("migrate_set_parameter max-bandwidth 0"), "");
    expect_completed(*src, *dst);
}

// With postcopy-ram on, the precopy before the switch resumes as any other: cut in the bulk
// round, over one connection, over multifd's lanes and with postcopy-preempt (whose second
// connection comes at the switch, over the mended link), both sides pause, the source's guest
// runs on; once the link is back and the rounds go on, migrate_start_postcopy switches over the
// new connection, and the guest arrives whole (the destination held paused: its RAM read whole
// is the source's).
TEST(PrecopyResume, APostcopyMigrationsPrecopyResumesAndThenSwitches) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    for (std::string with : {"", "multifd", "postcopy-preempt"}) {
        SCOPED_TRACE(with.empty() ? "one connection" : with);
        std::vector<std::string> more;
        if (!with.empty()) more.push_back(with + " on");
        uint16_t port = free_tcp_port();
        std::string name = with.empty() ? "pr-pc" : with == "multifd" ? "pr-pclanes" : "pr-pcpre";
        auto src = filled_source(name + "-src");
        auto dst = postcopy_destination(name + "-dst", tcp_uri(port), "256M", "1", true, more);
        ASSERT_TRUE(src && dst);
        ASSERT_EQ(src->cmd("migrate_set_capability postcopy-ram on"), "");
        for (const auto& c : more) ASSERT_EQ(src->cmd("migrate_set_capability " + c), "");
        ASSERT_EQ(src->cmd("migrate_set_parameter max-postcopy-bandwidth 16m"), "");
        TcpProxy link(port);
        ASSERT_NO_FATAL_FAILURE(start_through(*src, link));
        link.cut();
        ASSERT_NO_FATAL_FAILURE(expect_both_paused(*src, *dst));
        EXPECT_EQ(src->status(), "running");
        link.mend();
        ASSERT_TRUE(eventually([&] { return src->migrate_status() == "active"; }, 60)) << src->cmd("info migrate");
        EXPECT_EQ(src->cmd("migrate_start_postcopy"), "");
        expect_completed(*src, *dst);
        EXPECT_EQ(src->migrate_field("precopy resumes").substr(0, 2), "1 ") << src->cmd("info migrate");
        EXPECT_EQ(dst->migrate_field("precopy resumes").substr(0, 2), "1 ") << dst->cmd("info migrate");
        EXPECT_NE(src->migrate_field("postcopy missing pages"), "") << "it did not switch: " << src->cmd("info migrate");
        expect_handover(*src, *dst);
    }
}

}  // namespace vmm::test
