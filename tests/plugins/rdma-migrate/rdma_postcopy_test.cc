// Postcopy over the rdma: plugin (label rdma): after the switch a missing page is one SEND from
// the destination and one RDMA WRITE WITH IMMEDIATE back into a landing slot (or, with
// x-rdma-postcopy-read, one RDMA READ the source's CPU never sees), and the push writes the
// rest into slots of its own. Needs an RDMA device and userfaultfd:
//     scripts/softroce-run.sh ctest --test-dir build -R RdmaPostcopy
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>

#include "rdma_device.h"
#include "tests/support/require.h"
#include "tests/support/postcopy.h"

namespace vmm::test {

namespace {


// Sized for SoftRoCE under nested TCG (RDMA WRITE at 20-60 MB/s, the guest slow): a stress guest
// rewriting 8 MiB, started and stepping.
std::unique_ptr<Vm> stressed_source(const std::string& name) {
    auto vm = Vm::start(name, {"--guest", "stress", "-m", "128M", "--smp", "1", "--append", "bytes=8M"});
    if (vm) {
        EXPECT_TRUE(eventually([&] { return vm->guest_value("steps") >= 1; }, 120)) << vm->log();
    }
    return vm;
}

// A stressed source and a paused postcopy destination, x-rdma-postcopy-read on at both.
std::pair<std::unique_ptr<Vm>, std::unique_ptr<Vm>> reading_pair(const std::string& name, const std::string& uri) {
    auto src = stressed_source(name + "-src");
    auto dst = postcopy_destination(name + "-dst", uri, "128M", "1", true, {"x-rdma-postcopy-read on"});
    if (src) {
        EXPECT_EQ(src->cmd("migrate_set_capability x-rdma-postcopy-read on"), "");
    }
    return {std::move(src), std::move(dst)};
}

bool reaches(Vm& vm, const std::string& status, int seconds) {
    return eventually([&] { return vm.migrate_status() == status; }, seconds);
}

}  // namespace

// The destination holds the guest paused while postcopy runs slowly; reading all of its RAM
// there faults every missing page in over RDMA, asks only for pages it lacks, and finds exactly
// the source's RAM, before the push is done and after.
TEST(RdmaPostcopy, DigestsMatchAndOnlyMissingPagesAreRequested) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto src = stressed_source("rpc-digest-src");
    auto dst = postcopy_destination("rpc-digest-dst", uri, "128M", "1", true);
    ASSERT_TRUE(src && dst);
    migrate_switching_after_bulk(*src, uri, "0", "1m");
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    EXPECT_NE(src->log().find("and a postcopy channel"), std::string::npos) << "the source's log names no postcopy channel";
    std::string source_ram = src->ramhash();
    EXPECT_EQ(dst->ramhash(), source_ram) << "the destination's RAM, faulted in over RDMA, differs" << src->log() << dst->log();
    uint64_t missing = number(*dst, "postcopy missing pages");
    uint64_t requests = number(*dst, "postcopy requests");
    EXPECT_GT(missing, 0u) << dst->cmd("info migrate");
    EXPECT_LE(requests, missing) << "a page the destination had was requested";
    ASSERT_TRUE(reaches(*src, "completed", 300)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(reaches(*dst, "completed", 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(number(*src, "postcopy requests"), requests);
    EXPECT_EQ(dst->ramhash(), source_ram);
    std::cout << "rdma postcopy: " << missing << " missing pages, " << requests << " requested; "
              << text_field(dst->cmd("info migrate"), "postcopy fault latency") << "\n";
    expect_handover(*src, *dst);
}

// x-rdma-postcopy-read at both ends: the source tells its RAM's regions (KEYS) as the push
// begins, and the destination reads each missing page from there by RDMA READ, so the source's
// CPU hears of almost no fault (only those before their region's KEYS came); RAM ends equal.
TEST(RdmaPostcopy, FaultsAreReadByRdmaReadAndTheSourceHearsOfFew) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto [src, dst] = reading_pair("rpc-read", uri);
    ASSERT_TRUE(src && dst);
    migrate_switching_after_bulk(*src, uri, "0", "1m");
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    EXPECT_NE(src->log().find("faults by RDMA READ"), std::string::npos) << "the source's log names no READ faults\n"
                                                                       << src->log();
    std::string source_ram = src->ramhash();
    EXPECT_EQ(dst->ramhash(), source_ram) << "the destination's RAM, read over RDMA, differs" << src->log() << dst->log();
    ASSERT_TRUE(reaches(*src, "completed", 300)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(reaches(*dst, "completed", 60)) << dst->cmd("info migrate") << dst->log();
    uint64_t faults = number(*dst, "postcopy requests");
    uint64_t heard = number(*src, "postcopy requests");
    EXPECT_GT(faults, 0u) << dst->cmd("info migrate");
    EXPECT_LT(heard, faults) << "every fault reached the source: none was read\n" << dst->log();
    // The destination's sweep read runs of a MiB and more: it told the source (HAVE), whose push
    // then skipped them.
    EXPECT_GT(number(*src, "postcopy pages the destination read itself (not pushed)"), 0u) << src->cmd("info migrate");
    std::string line = dst->log().substr(std::min(dst->log().size(), dst->log().find("rdma postcopy: ")));
    EXPECT_EQ(line.find("rdma postcopy: 0 faults read"), std::string::npos) << line;
    // The fault thread awaited its READs itself and placed their pages (pc_fetch), through vmm.
    size_t awaited = line.find(" READs awaited and placed by the fault thread");
    ASSERT_NE(awaited, std::string::npos) << line;
    size_t count_at = line.rfind("; ", awaited);
    ASSERT_NE(count_at, std::string::npos) << line;
    EXPECT_GT(std::strtoull(line.c_str() + count_at + 2, nullptr, 10), 0u) << "no fault was placed by its own thread\n" << line;
    // Only the pages the source has were registered for READ (pinning the rest would make them):
    // the guest's 8 MiB and the little else it touched, not its 128 MiB.
    const std::string log = src->log(), exposed = "x-rdma-postcopy-read: ";
    size_t at = log.find(" MiB of RAM registered for RDMA READ");
    ASSERT_NE(at, std::string::npos) << log;
    size_t from = log.rfind(exposed, at);
    ASSERT_NE(from, std::string::npos) << log;
    uint64_t registered = std::strtoull(log.c_str() + from + exposed.size(), nullptr, 10);
    EXPECT_GT(registered, 0u) << log;
    EXPECT_LT(registered, 64u) << "the source registered RAM its guest never touched\n" << log;
    EXPECT_EQ(dst->ramhash(), source_ram);
    std::cout << "rdma postcopy by READ: " << faults << " faults, " << heard << " heard by the source, " << registered
              << " MiB registered for READ; "
              << text_field(dst->cmd("info migrate"), "postcopy fault latency") << "\n";
    expect_handover(*src, *dst);
}

// x-rdma-postcopy-read-push at the source too: the destination reads the push itself, at the
// source's max-postcopy-bandwidth told in KEYS, and the source writes none of the missing
// pages (they all lie in regions it told); END waits for the last piece; RAM ends equal.
TEST(RdmaPostcopy, ThePushIsReadByTheDestinationAndTheSourceWritesNoneOfIt) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto [src, dst] = reading_pair("rpc-pull", uri);
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate_set_capability x-rdma-postcopy-read-push on"), "");
    migrate_switching_after_bulk(*src, uri, "0", "2m");
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    EXPECT_NE(src->log().find("faults and the push by RDMA READ"), std::string::npos)
        << "the source's log names no push by READ\n" << src->log();
    std::string source_ram = src->ramhash();
    ASSERT_TRUE(reaches(*src, "completed", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    ASSERT_TRUE(reaches(*dst, "completed", 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(dst->ramhash(), source_ram) << "the destination's RAM, read over RDMA, differs" << dst->log();
    uint64_t missing = number(*src, "postcopy missing pages");
    uint64_t held = number(*src, "postcopy pages the destination read itself (not pushed)");
    EXPECT_GT(missing, 0u) << src->cmd("info migrate");
    EXPECT_EQ(number(*src, "postcopy pushed"), 0u) << "the source wrote pages the destination reads\n" << src->cmd("info migrate");
    EXPECT_GT(held, 0u) << src->cmd("info migrate");
    const std::string log = dst->log(), said = "x-rdma-postcopy-read-push: this side read ";
    size_t at = log.find(said);
    ASSERT_NE(at, std::string::npos) << "the destination did not say what it read\n" << log;
    uint64_t pulled = std::strtoull(log.c_str() + at + said.size(), nullptr, 10);
    EXPECT_GT(pulled, 0u) << log.substr(at);
    EXPECT_NE(log.find(" at 2 MiB/s", at), std::string::npos) << "the source's pace did not reach the destination\n"
                                                                  << log.substr(at);
    std::cout << "rdma postcopy, push by READ: " << missing << " missing, " << held << " held by the source's count, "
              << pulled << " read by the destination's push; " << log.substr(at, log.find('\n', at) - at) << "\n";
    expect_handover(*src, *dst);
}

// A link cut while faults are read: both sides pause as without READ, and the new connection
// tells its regions again (the old rkeys died with the old queue pair's registrations).
TEST(RdmaPostcopy, ReadFaultsGoOnAfterAPausedLinkIsRecovered) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto [src, dst] = reading_pair("rpc-readrec", uri);
    ASSERT_TRUE(src && dst);
    migrate_switching_after_bulk(*src, uri, "0", "256k");
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(reaches(*dst, "postcopy-active", 60)) << dst->cmd("info migrate");
    std::string at_switch = src->ramhash();
    ASSERT_NO_FATAL_FAILURE(pause_and_recover(*src, *dst, rdma_uri()));
    EXPECT_EQ(dst->ramhash(), at_switch) << "the destination's RAM, read after the recovery, differs" << dst->log();
    ASSERT_TRUE(reaches(*src, "completed", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    ASSERT_TRUE(reaches(*dst, "completed", 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(number(*src, "postcopy recoveries"), 1u) << src->cmd("info migrate");
    EXPECT_LT(number(*src, "postcopy requests"), number(*dst, "postcopy requests")) << dst->log();
    EXPECT_EQ(dst->ramhash(), at_switch);
    // The recovered connection registered only what the guest wrote, though the digest before it
    // read every page of the source's RAM (which maps the zero page where the guest never wrote).
    const std::string log = src->log(), said = "x-rdma-postcopy-read: ";
    size_t at = log.rfind(" MiB of RAM registered for RDMA READ");
    ASSERT_NE(at, std::string::npos) << log;
    ASSERT_GT(at, log.find("postcopy resumed")) << "the recovered connection did not say what it registered\n" << log;
    size_t from = log.rfind(said, at);
    ASSERT_NE(from, std::string::npos) << log;
    EXPECT_LT(std::strtoull(log.c_str() + from + said.size(), nullptr, 10), 64u)
        << "RAM the guest never wrote was registered\n" << log.substr(from, at - from + 40);
}

// The pattern guest runs at the destination from the switch on, under verify-ram: every page's
// sum rides in its slot's trailer and is checked before the page is placed; the guest's own
// check passes there while pages still arrive.
TEST(RdmaPostcopy, PatternGuestRunsOnWhilePagesArriveVerified) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto src = Vm::start("rpc-pattern-src", {"--guest", "pattern", "-m", "128M", "--smp", "1", "--append", "bytes=8M check=64"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 120)) << src->cmd("info guest");
    auto dst = Vm::start("rpc-pattern-dst", {"-m", "128M", "--smp", "1", "--incoming", "defer"});
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(dst->cmd("migrate_set_capability verify-ram on"), "");
    EXPECT_EQ(dst->cmd("migrate_incoming " + uri), "");
    EXPECT_EQ(src->cmd("migrate_set_capability verify-ram on"), "");
    migrate_switching_after_bulk(*src, uri, "0", "2m");
    ASSERT_TRUE(reaches(*dst, "completed", 300)) << dst->cmd("info migrate") << dst->log() << src->log();
    ASSERT_TRUE(reaches(*src, "completed", 60)) << src->cmd("info migrate") << src->log();
    EXPECT_GT(number(*dst, "postcopy missing pages"), 0u) << dst->cmd("info migrate");
    EXPECT_NE(dst->migrate_field("verified ram"), "") << dst->cmd("info migrate");
    uint64_t results = dst->guest_value("results");
    EXPECT_TRUE(eventually([&] { return dst->guest_value("results") >= results + 1; }, 120))
        << "the pattern check did not pass again on the destination:\n" << dst->cmd("info guest");
    EXPECT_EQ(dst->guest_value("errors"), 0u) << dst->cmd("info guest");
}

// Killed in postcopy, the destination takes the guest's newest state with it: the source's
// postcopy channel fails, and it keeps what it had at the switch, paused, refusing 'cont'.
TEST(RdmaPostcopy, ADestinationKilledInPostcopyLeavesTheSourcePausedAndIntact) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto src = stressed_source("rpc-kill-src");
    auto dst = postcopy_destination("rpc-kill-dst", uri, "128M", "1", false);
    ASSERT_TRUE(src && dst);
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, uri, "0", "256k");
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log();
    std::string at_switch = src->ramhash();
    ::kill(dst->process().pid(), SIGKILL);
    ASSERT_TRUE(reaches(*src, "postcopy-paused", 120)) << src->cmd("info migrate") << src->log();
    EXPECT_EQ(src->status(), "postmigrate");
    EXPECT_EQ(src->ramhash(), at_switch) << "the source's copy of the guest changed";
    std::string refused = src->cmd("cont");
    EXPECT_NE(refused.find("would fork it"), std::string::npos) << refused;
}

// migrate_pause cuts the rdma link mid-postcopy (rdma_disconnect on every queue pair): both
// sides go to postcopy-paused; migrate_recover and migrate -r over a new rdma connection, with
// its own postcopy channel, resume it, and the destination ends with exactly the source's RAM.
TEST(RdmaPostcopy, APausedLinkIsRecoveredOverANewConnection) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto src = stressed_source("rpc-recover-src");
    auto dst = postcopy_destination("rpc-recover-dst", uri, "128M", "1", true);
    ASSERT_TRUE(src && dst);
    migrate_switching_after_bulk(*src, uri, "0", "256k");  // seconds of push left to cut
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log();
    ASSERT_TRUE(reaches(*dst, "postcopy-active", 60)) << dst->cmd("info migrate");
    std::string at_switch = src->ramhash();
    ASSERT_NO_FATAL_FAILURE(pause_and_recover(*src, *dst, rdma_uri()));
    ASSERT_TRUE(reaches(*src, "completed", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    ASSERT_TRUE(reaches(*dst, "completed", 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(number(*src, "postcopy recoveries"), 1u) << src->cmd("info migrate");
    EXPECT_EQ(src->ramhash(), at_switch);
    EXPECT_EQ(dst->ramhash(), at_switch) << "the destination's RAM after the recovery differs from the source's";
}

// postcopy-ram on at the source only: the destination grants no postcopy channel, and the
// migration is refused with what to do, before any RAM moves; the guest runs on.
TEST(RdmaPostcopy, ADestinationWithoutPostcopyIsRefusedClearly) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd(), need::rdma());
    std::string uri = rdma_uri();
    auto src = stressed_source("rpc-off-src");
    auto dst = Vm::start("rpc-off-dst", {"-m", "128M", "--smp", "1", "--incoming", uri});
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(src->cmd("migrate_set_capability postcopy-ram on"), "");
    std::string out = src->cmd("migrate " + uri);
    EXPECT_NE(out.find("postcopy-ram"), std::string::npos) << out;
    EXPECT_NE(out.find("destination"), std::string::npos) << out;
    EXPECT_EQ(src->status(), "running");
}

}  // namespace vmm::test
