// A postcopy whose link breaks: both sides wait in postcopy-paused with all their state, and
// migrate_recover (destination) + migrate -r (source) resume it over a new connection, as in
// QEMU. The link is cut by a forwarder neither vmm knows about, or by migrate_pause.
#include <gtest/gtest.h>

#include "tests/support/require.h"
#include "tests/support/postcopy.h"
#include "tests/support/tcp_proxy.h"

namespace vmm::test {

// Source -> forwarder -> destination (held paused with -S, so RAM can be compared): the
// forwarder dies mid-postcopy. A resume before the destination listens fails and leaves both
// paused; after migrate_recover (issued twice: the first URI is superseded) it completes, and
// the destination holds exactly the source's RAM.
TEST(PostcopyRecovery, ACutLinkIsRecoveredAndTheRamArrivesWhole) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("pcr-cut-src");
    auto dst = postcopy_destination("pcr-cut-dst", tcp_uri(port), "128M", "1", true);
    ASSERT_TRUE(src && dst);
    TcpProxy link(port);
    EXPECT_NE(src->cmd("migrate -r " + tcp_uri(port)).find("no outgoing migration"), std::string::npos);
    EXPECT_NE(dst->cmd("migrate_recover " + tcp_uri(free_tcp_port())).find("this one is"), std::string::npos);
    migrate_switching_after_bulk(*src, tcp_uri(link.port()), "16m", "2m");  // seconds of push left to cut
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "postcopy-active"; }, 30)) << dst->cmd("info migrate");
    EXPECT_NE(src->cmd("migrate -r " + tcp_uri(port)).find("this one is postcopy-active"), std::string::npos);
    std::string at_switch = src->ramhash();  // the source's copy no longer changes
    link.cut();
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused"; }, 60)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "postcopy-paused"; }, 60)) << dst->cmd("info migrate");
    EXPECT_NE(src->cmd("info migrate").find("error: "), std::string::npos) << src->cmd("info migrate");
    EXPECT_NE(src->cmd("cont").find("would fork it"), std::string::npos);
    EXPECT_NE(src->cmd("migrate_cancel").find("cannot be cancelled"), std::string::npos);
    EXPECT_NE(dst->cmd("migrate_pause").find("this one is postcopy-paused"), std::string::npos);

    // Nobody listens yet: the resume, in the foreground, fails and says why on its last line (what
    // vmmctl's exit status reads), and both stay paused, ready for the next try.
    uint16_t again = free_tcp_port();
    std::string resumed = src->cmd("migrate -r " + tcp_uri(again));
    EXPECT_NE(resumed.find("Error: postcopy paused: "), std::string::npos) << resumed;
    EXPECT_NE(resumed.find("127.0.0.1:" + std::to_string(again)), std::string::npos) << resumed;
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused" &&
                                        src->migrate_field("error").find("127.0.0.1:" + std::to_string(again)) !=
                                            std::string::npos; }, 60))
        << src->cmd("info migrate");
    EXPECT_EQ(dst->migrate_status(), "postcopy-paused");

    // First on a URI the source is not told of: a second migrate_recover takes its place, as
    // QEMU lets a mistyped one be issued again.
    uint16_t wrong = free_tcp_port();
    EXPECT_EQ(dst->cmd("migrate_recover " + tcp_uri(wrong)), "");
    EXPECT_EQ(dst->migrate_status(), "postcopy-recover");
    EXPECT_EQ(dst->cmd("migrate_recover " + tcp_uri(again)), "");
    EXPECT_EQ(dst->migrate_status(), "postcopy-recover");
    EXPECT_FALSE(tcp_connect(wrong)) << "the first migrate_recover still listens";
    EXPECT_EQ(src->cmd("migrate -d -r " + tcp_uri(again)), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(link.connections(), 2);  // the main connection and postcopy-preempt's
    EXPECT_EQ(number(*src, "postcopy recoveries"), 1u) << src->cmd("info migrate");
    EXPECT_EQ(number(*dst, "postcopy recoveries"), 1u) << dst->cmd("info migrate");
    EXPECT_EQ(src->ramhash(), at_switch);
    EXPECT_EQ(dst->ramhash(), at_switch) << "the destination's RAM after the recovery differs from the source's";
    expect_handover(*src, *dst);
}

// The stress guest runs on at the destination while the link is paused (migrate_pause there,
// as soon as postcopy starts): a vCPU that touches a missing page waits, the recovery brings
// it, and the guest's own checks still find no error.
TEST(PostcopyRecovery, APausedLinkResumesUnderARunningGuest) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("pcr-pause-src", "32M");  // rewritten while the bulk round runs
    auto dst = postcopy_destination("pcr-pause-dst", tcp_uri(port), "128M", "1", false);
    ASSERT_TRUE(src && dst);
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port));
    // Refused until postcopy runs there; then the link is cut with thousands of pages missing.
    ASSERT_TRUE(eventually([&] { return dst->cmd("migrate_pause").empty(); }, 120)) << dst->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused"; }, 60)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "postcopy-paused"; }, 60)) << dst->cmd("info migrate");
    uint64_t missing = number(*dst, "postcopy missing pages");
    EXPECT_GT(missing, 1000u) << dst->cmd("info migrate");
    EXPECT_EQ(dst->status(), "running") << "the guest stays with the destination, its vCPU waiting on missing pages";
    recover_and_complete(*src, *dst);
    if (HasFatalFailure()) return;
    EXPECT_EQ(number(*dst, "postcopy recoveries"), 1u) << dst->cmd("info migrate");
    EXPECT_EQ(number(*src, "postcopy missing pages"), missing);
    uint64_t steps = dst->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 2; }, 60)) << "the guest did not run on";
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
}

// With postcopy-preempt the pause cuts both connections, and the resumed link opens its own
// preempt connection: the guest's faults are answered there before and after, and it runs on.
TEST(PostcopyRecovery, APausedPreemptLinkResumesWithItsPreemptConnection) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("pcr-preempt-src", "32M");
    auto dst = postcopy_destination("pcr-preempt-dst", tcp_uri(port), "128M", "1", false);  // on by default
    ASSERT_TRUE(src && dst);
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port));
    // In postcopy: a pause before the switch would pause the precopy (it resumes too).
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    ASSERT_EQ(src->cmd("migrate_pause"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused"; }, 60)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "postcopy-paused"; }, 60)) << dst->cmd("info migrate");
    recover_and_complete(*src, *dst);
    if (HasFatalFailure()) return;
    EXPECT_EQ(number(*dst, "postcopy recoveries"), 1u) << dst->cmd("info migrate");
    EXPECT_GT(number(*dst, "postcopy preempt pages"), 0u) << dst->cmd("info migrate");
    uint64_t steps = dst->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 2; }, 60)) << "the guest did not run on";
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
}

// Forced to run at the source while postcopy is paused ('cont -f'), the guest has forked: the
// postcopy ends (failed, saying why), a resume is refused, and a new migration may start.
TEST(PostcopyRecovery, AForcedContEndsThePausedPostcopy) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("pcr-force-src");
    auto dst = postcopy_destination("pcr-force-dst", tcp_uri(port), "128M", "1", true);
    ASSERT_TRUE(src && dst);
    // Without it the guest's faults in order pulled the rest in and the postcopy could end before
    // the pause (seen in the nested VM: migrate_pause found the link closed by a finished peer).
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port));
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("migrate_pause"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused"; }, 60)) << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("cont -f"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "failed"; }, 30)) << src->cmd("info migrate");
    EXPECT_NE(src->migrate_field("error").find("forked"), std::string::npos) << src->cmd("info migrate");
    EXPECT_NE(src->cmd("migrate -r " + tcp_uri(free_tcp_port())).find("this one is failed"), std::string::npos);
    EXPECT_EQ(src->status(), "running");
    // The destination never got all its pages: quitting it is not a clean end.
    ASSERT_EQ(dst->migrate_status(), "postcopy-paused");
    (void)dst->cmd("quit");
    EXPECT_EQ(dst->process().wait(std::chrono::seconds(30)), std::optional<int>(3)) << dst->log();  // Machine::kIncompleteExit
}

// The switch to postcopy as a commit (x-switchover-cut on the source). Cut just after GO went
// (3): the destination runs the guest, both sides wait in postcopy-paused, and the recovery
// completes it. Cut just before (2), so that GO's write fails: the source cannot know whether
// GO arrived (over RDMA a send can land while its acknowledgement is lost), so it keeps its copy
// paused in postcopy-paused, saying how to tell which side to run; here the destination never
// had GO and ends, and 'cont -f' runs the one copy. Never two running, never none without a line.
TEST(PostcopyRecovery, TheSwitchCutAtGoEndsWithOneCopy) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    {
        SCOPED_TRACE("cut after GO");
        uint16_t port = free_tcp_port();
        auto src = stress_source("pcr-go3-src");
        auto dst = postcopy_destination("pcr-go3-dst", tcp_uri(port), "128M", "1", false);
        ASSERT_TRUE(src && dst);
        keep_the_push_slow(*src);
        ASSERT_EQ(src->cmd("migrate_set_parameter x-switchover-cut 3"), "");
        migrate_switching_after_bulk(*src, tcp_uri(port));
        ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "postcopy-paused"; }, 120))
            << dst->cmd("info migrate") << dst->log();
        EXPECT_EQ(dst->status(), "running") << "the guest runs at the destination, which had GO";
        recover_and_complete(*src, *dst);
        if (HasFatalFailure()) return;
        EXPECT_EQ(src->status(), "postmigrate");  // it moved
        EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
    }
    SCOPED_TRACE("cut before GO, whose write then fails");
    uint16_t port = free_tcp_port();
    auto src = stress_source("pcr-go2-src");
    auto dst = postcopy_destination("pcr-go2-dst", tcp_uri(port), "128M", "1", false);
    ASSERT_TRUE(src && dst);
    ASSERT_EQ(src->cmd("migrate_set_parameter x-switchover-cut 2"), "");
    migrate_switching_after_bulk(*src, tcp_uri(port));
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused"; }, 120))
        << src->cmd("info migrate") << src->log();
    EXPECT_EQ(src->status(), "postmigrate");  // paused, and 'cont' refused
    std::string error = src->migrate_field("error");
    EXPECT_NE(error.find("the destination may run the guest"), std::string::npos) << error;
    EXPECT_NE(error.find("if it does not, 'cont -f' here runs it"), std::string::npos) << error;
    EXPECT_NE(src->cmd("cont").find("would fork it"), std::string::npos);
    dst->forget_monitor();
    EXPECT_EQ(dst->process().wait(std::chrono::seconds(30)), std::optional<int>(1)) << "it never had GO: " << dst->log();
    EXPECT_EQ(src->cmd("cont -f"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "failed"; }, 30)) << src->cmd("info migrate");
    EXPECT_EQ(src->status(), "running");
    uint64_t steps = src->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 60)) << "the guest does not run here";
}

}  // namespace vmm::test
