// Postcopy between two vmm processes on loopback: the guest switches to the destination before
// all of its RAM has, and the destination pulls what it lacks through userfaultfd.
#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>

#include "tests/support/require.h"
#include "tests/support/postcopy.h"

namespace vmm::test {

// The stress guest rewrites 64 MiB far faster than max-bandwidth moves it: precopy alone never
// ends (no auto-converge), postcopy does, and the guest carries on at the destination.
TEST(Postcopy, AGuestPrecopyCannotFinishCompletesInPostcopy) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("pc-stress-src", {"--guest", "stress", "-m", "256M", "--smp", "2", "--append", "bytes=64M"});
    auto dst = postcopy_destination("pc-stress-dst", tcp_uri(port), "256M", "2", false);
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    EXPECT_EQ(src->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter max-bandwidth 32m"), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter max-postcopy-bandwidth 16m"), "");  // the guest faults before the push is done
    EXPECT_NE(src->cmd("migrate_start_postcopy").find("no outgoing migration"), std::string::npos);
    EXPECT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    // Three dirty rounds and still as much dirty as a round can send: precopy is not converging.
    ASSERT_TRUE(eventually([&] { return number(*src, "rounds") >= 4; }, 120)) << src->cmd("info migrate");
    EXPECT_EQ(src->migrate_status(), "active") << src->cmd("info migrate");
    EXPECT_GT(std::stoull(src->migrate_field("remaining ram")), 16u * 1024) << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("migrate_start_postcopy"), "");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(src->status(), "postmigrate");
    EXPECT_EQ(dst->status(), "running");
    EXPECT_GT(number(*src, "postcopy missing pages"), 1000u) << src->cmd("info migrate");
    EXPECT_EQ(number(*dst, "postcopy missing pages"), number(*src, "postcopy missing pages"));
    EXPECT_GT(number(*dst, "postcopy requests"), 0u) << dst->cmd("info migrate");
    EXPECT_NE(dst->migrate_field("postcopy blocktime"), "") << dst->cmd("info migrate");
    // The guest's own view: the stress payload reads the clock every 64 pages, and a read held
    // up by a missing page is a stall (at least the fault's latency).
    EXPECT_NE(dst->migrate_field("guest's longest stall in postcopy"), "") << dst->cmd("info migrate");
    uint64_t steps = dst->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("steps") > steps + 2; }, 60)) << "the guest did not run on";
    EXPECT_EQ(dst->guest_value("errors"), 0u);
}

// The destination holds the guest paused (-S) while postcopy runs slowly: reading all of its RAM
// there ('info ramhash') faults every missing page in, asks the source only for pages it lacks,
// settles never-populated and zero pages alone, and finds exactly the source's RAM (readahead
// on, as by default).
TEST(Postcopy, DigestsMatchAndOnlyMissingPagesAreRequested) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("pc-digest-src");
    auto dst = postcopy_destination("pc-digest-dst", tcp_uri(port), "128M", "1", true);
    ASSERT_TRUE(src && dst);
    // At 16 MB/s the guest rewrites all 16 MiB during the bulk round; 16 MiB pushed at 1 MB/s:
    // the read below faults every page in long before the push is done, even on a loaded
    // machine (CI: ~100 us a fault).
    migrate_switching_after_bulk(*src, tcp_uri(port), "16m", "1m");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    EXPECT_NE(src->cmd("migrate_cancel").find("postcopy cannot be cancelled"), std::string::npos);
    EXPECT_NE(src->cmd("cont").find("would fork it"), std::string::npos);
    std::string source_ram = src->ramhash();
    EXPECT_EQ(dst->ramhash(), source_ram) << "the destination's RAM, faulted in during postcopy, differs";
    uint64_t missing = number(*dst, "postcopy missing pages");
    uint64_t requests = number(*dst, "postcopy requests");
    uint64_t zero_local = number(*dst, "postcopy zero pages placed without asking");
    EXPECT_GT(missing, 1000u) << dst->cmd("info migrate");
    EXPECT_LE(requests, missing) << "a page the destination had was requested";
    // How many of the never-populated pages the read reaches before the push ends depends on the
    // machine's speed; that they cost no request is PostcopyReceiver's unit test, exactly.
    EXPECT_LE(requests + zero_local, 128u * 256) << dst->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate");
    EXPECT_EQ(number(*src, "postcopy requests"), requests);
    if (requests != 0) {  // the source's share of the fault latency
        EXPECT_NE(src->migrate_field("postcopy serve latency").find(" requests, read until"), std::string::npos)
            << src->cmd("info migrate");
    }
    // The read faults page after page: requests in order, so the push ran ahead of its pace
    // past them (x-postcopy-readahead), and those pages too arrived intact.
    EXPECT_GT(number(*src, "postcopy readahead pages"), 0u) << src->cmd("info migrate");
    EXPECT_EQ(dst->ramhash(), source_ram);
    expect_handover(*src, *dst);
}

// migrate_start_postcopy during the bulk round switches there, as QEMU's does: what the round
// had not sent yet is missing at the destination with what the guest dirtied, and arrives
// in postcopy; the destination's RAM equals the source's.
TEST(Postcopy, StartPostcopyInTheBulkRoundSwitchesThere) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("pc-early-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--append", "bytes=16M",
                                          "--prefill", "64M"});
    auto dst = postcopy_destination("pc-early-dst", tcp_uri(port), "128M", "1", true);
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 2; }, 60));
    EXPECT_EQ(src->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter max-bandwidth 8m"), "");  // the bulk round would take 8 s ...
    EXPECT_EQ(src->cmd("migrate_set_parameter max-postcopy-bandwidth 1m"), "");
    EXPECT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    ASSERT_TRUE(eventually([&] { return number(*src, "transferred ram") > 0; }, 60)) << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("migrate_start_postcopy"), "");  // ... but it stops here
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 60)) << src->cmd("info migrate");
    // Half the prefilled RAM and more was still to go in the bulk round when it stopped.
    uint64_t missing = number(*src, "postcopy missing pages");
    EXPECT_GT(missing, 32u * 256) << src->cmd("info migrate");
    EXPECT_EQ(number(*src, "rounds"), 1u) << src->cmd("info migrate");
    std::string source_ram = src->ramhash();
    EXPECT_EQ(dst->ramhash(), source_ram) << "the destination's RAM, faulted in during postcopy, differs";
    EXPECT_LE(number(*dst, "postcopy requests"), missing);
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate");
    EXPECT_EQ(number(*dst, "postcopy missing pages"), missing);
    EXPECT_EQ(dst->ramhash(), source_ram);
    // Both count what moved in both phases: most of it came after the switch.
    uint64_t sent = number(*src, "transferred ram"), arrived = number(*dst, "transferred ram");
    EXPECT_GE(arrived, sent * 9 / 10) << "the destination left out its postcopy pages:\n" << dst->cmd("info migrate");
    EXPECT_LE(arrived, sent) << dst->cmd("info migrate");
    expect_handover(*src, *dst);
}

// postcopy-preempt (on by default): the pages the destination faults on come on a connection of
// their own, so they never wait behind the push; without it the stream carries them. RAM
// digests match either way.
static void expect_faults_answered(bool preempt) {
    uint16_t port = free_tcp_port();
    std::string setting = std::string("postcopy-preempt ") + (preempt ? "on" : "off");
    auto src = stress_source(preempt ? "pc-preempt-src" : "pc-plain-src");
    auto dst = postcopy_destination(preempt ? "pc-preempt-dst" : "pc-plain-dst", tcp_uri(port), "128M", "1", true, {setting});
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate_set_capability " + setting), "");
    // Without readahead every page the read below faults on is a request: what is tested here.
    EXPECT_EQ(src->cmd("migrate_set_parameter x-postcopy-readahead 0"), "");
    migrate_switching_after_bulk(*src, tcp_uri(port), "16m", "1m");
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    std::string source_ram = src->ramhash();
    EXPECT_EQ(dst->ramhash(), source_ram) << "the destination's RAM, faulted in during postcopy, differs";
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed"; }, 120)) << src->cmd("info migrate");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 30)) << dst->cmd("info migrate");
    EXPECT_GT(number(*dst, "postcopy requests"), 100u) << dst->cmd("info migrate");
    EXPECT_EQ(number(*src, "postcopy readahead pages"), 0u) << "readahead off, yet the push ran ahead of its pace";
    // Every page a request still lacked went on the preempt connection, and was placed from it.
    uint64_t sent = number(*src, "postcopy preempt pages");
    EXPECT_EQ(sent > 0, preempt) << src->cmd("info migrate");
    EXPECT_EQ(number(*dst, "postcopy preempt pages"), sent) << dst->cmd("info migrate");
    EXPECT_EQ(dst->ramhash(), source_ram);
    expect_handover(*src, *dst);
}

TEST(Postcopy, PreemptAnswersFaultsOnAConnectionOfTheirOwn) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    expect_faults_answered(true);
}

TEST(Postcopy, WithoutPreemptTheStreamCarriesTheAnswers) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    expect_faults_answered(false);
}

// postcopy-preempt on one side only is refused before anything moves, saying which side lacks
// it; the source's guest runs on.
TEST(Postcopy, PreemptOnOneSideOnlyIsRefusedClearly) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    for (bool source_has_it : {true, false}) {
        uint16_t port = free_tcp_port();
        auto src = stress_source(source_has_it ? "pc-preempt1-src" : "pc-preempt2-src");
        auto dst = postcopy_destination(source_has_it ? "pc-preempt1-dst" : "pc-preempt2-dst", tcp_uri(port), "128M", "1",
                                        false, {source_has_it ? "postcopy-preempt off" : "postcopy-preempt on"});
        ASSERT_TRUE(src && dst);
        EXPECT_EQ(src->cmd("migrate_set_capability postcopy-ram on"), "");
        EXPECT_EQ(src->cmd(std::string("migrate_set_capability postcopy-preempt ") + (source_has_it ? "on" : "off")), "");
        std::string out = src->cmd("migrate " + tcp_uri(port));
        std::string why = source_has_it ? "the source has postcopy-preempt on, this destination does not"
                                        : "this destination has postcopy-preempt on, the source does not";
        EXPECT_NE(out.find(why), std::string::npos) << out;
        EXPECT_EQ(src->status(), "running");
    }
}

// The pattern guest runs at the destination from the switch on and checks its RAM there while
// the pages still arrive: its own check passes, and it faulted pages in on the way.
TEST(Postcopy, PatternGuestsOwnCheckPassesWhilePagesArrive) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = Vm::start("pc-pattern-src", {"--guest", "pattern", "-m", "128M", "--smp", "1", "--append", "bytes=32M check=512"});
    auto dst = postcopy_destination("pc-pattern-dst", tcp_uri(port), "128M", "1", false);
    ASSERT_TRUE(src && dst);
    ASSERT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 60)) << src->cmd("info guest");
    EXPECT_EQ(src->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(src->cmd("migrate_set_parameter max-bandwidth 16m"), "");  // the bulk round takes seconds ...
    EXPECT_EQ(src->cmd("migrate_set_parameter max-postcopy-bandwidth 1m"), "");
    EXPECT_EQ(src->cmd("migrate -d " + tcp_uri(port)), "");
    EXPECT_EQ(src->cmd("migrate_start_postcopy"), "");  // ... and stops short: most of it comes in postcopy
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 120)) << dst->cmd("info migrate") << dst->log();
    EXPECT_GT(number(*dst, "postcopy missing pages"), 0u) << dst->cmd("info migrate");
    uint64_t results = dst->guest_value("results");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 2; }, 60))
        << "the pattern check did not pass again on the destination:\n" << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
}

// Killed in postcopy, the destination takes the guest's newest state with it; the source keeps
// what it had at the switch, paused, and will not run it ('cont') without being forced.
TEST(Postcopy, ADestinationKilledInPostcopyLeavesTheSourcePausedAndIntact) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("pc-kill-src");
    auto dst = postcopy_destination("pc-kill-dst", tcp_uri(port), "128M", "1", false);
    ASSERT_TRUE(src && dst);
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port));
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    std::string at_switch = src->ramhash();
    ::kill(dst->process().pid(), SIGKILL);
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-paused"; }, 60)) << src->cmd("info migrate");
    EXPECT_EQ(src->status(), "postmigrate");
    EXPECT_EQ(src->ramhash(), at_switch) << "the source's copy of the guest changed";
    std::string refused = src->cmd("cont");
    EXPECT_NE(refused.find("would fork it"), std::string::npos) << refused;
    EXPECT_EQ(src->status(), "postmigrate");
    EXPECT_NE(src->cmd("info migrate").find("error: "), std::string::npos) << src->cmd("info migrate");
    EXPECT_EQ(src->cmd("cont -f"), "");  // forced: the user takes the source's copy back
    uint64_t steps = src->guest_value("steps");
    EXPECT_TRUE(eventually([&] { return src->guest_value("steps") > steps + 1; }, 60)) << "the forced guest did not run";
}

}  // namespace vmm::test
