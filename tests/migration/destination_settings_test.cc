// A destination started with --incoming URI (not defer) reads its settings when the source
// connects, not when it started listening: what a person sets on its monitor while it waits is
// what the migration uses, as with QEMU's classic recipe. One test per setting a destination
// reads (docs/architecture.md, "Settings"), each typed at the monitor in the order a person would.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>

#include "tests/support/require.h"
#include "tests/support/postcopy.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::test {

namespace {

// A destination that listens at once (-S: it stays paused after the migration, for the digests).
std::unique_ptr<Vm> waiting_destination(const std::string& name, uint16_t port) {
    return Vm::start(name, {"-m", "128M", "--smp", "1", "-S", "--incoming", tcp_uri(port)});
}

// The source's side of a postcopy that switches after the bulk round; `preempt` is its
// postcopy-preempt capability.
void migrate_in_postcopy(Vm& src, uint16_t port, bool preempt) {
    EXPECT_EQ(src.cmd(std::string("migrate_set_capability postcopy-preempt ") + (preempt ? "on" : "off")), "");
    migrate_switching_after_bulk(src, tcp_uri(port), sized("16m", "4m"), sized("1m", "256k"));
}

// Waits until the source's migration has ended, either way (a refusal ends it at once).
bool migration_ends(Vm& src) {
    return eventually([&] { return src.migrate_status() == "completed" || src.migrate_status() == "failed"; }, 300);
}

}  // namespace

// A stress guest started as `name` migrates to `dst` (waiting on `port`) in postcopy, with
// postcopy-preempt `preempt` on the source; both sides complete and the guest runs on there.
static void migrates_in_postcopy_to(Vm& dst, uint16_t port, const std::string& name, bool preempt) {
    auto src = stress_source(name, sized("16M", "2M"));
    ASSERT_TRUE(src);
    keep_the_push_slow(*src);
    migrate_in_postcopy(*src, port, preempt);
    ASSERT_TRUE(migration_ends(*src)) << src->cmd("info migrate");
    ASSERT_EQ(src->migrate_status(), "completed") << src->cmd("info migrate") << dst.log();
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "completed"; }, 60)) << dst.cmd("info migrate");
    expect_handover(*src, dst);
}

// Before: the listener kept the settings of its start, 'info migrate_capabilities' showed
// postcopy-ram on, and the source's migration was refused ("this destination does not").
TEST(DestinationSettings, PostcopyRamSetWhileItWaitsIsUsed) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto dst = waiting_destination("ds-pc-dst", port);
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_NE(dst->cmd("info migrate_capabilities").find("postcopy-ram: on"), std::string::npos);
    migrates_in_postcopy_to(*dst, port, "ds-pc-src", true);
    if (HasFatalFailure()) return;
    EXPECT_GT(std::stoull(text_field(dst->cmd("info migrate"), "postcopy missing pages")), 0u) << dst->cmd("info migrate");
}

// postcopy-preempt is on by default: turned off on the waiting destination (and on the source),
// the postcopy runs without the extra connection. Before, the destination refused: "this
// destination has postcopy-preempt on, the source does not".
TEST(DestinationSettings, PostcopyPreemptTurnedOffWhileItWaitsIsUsed) {
    VMM_REQUIRE(need::kvm(), need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto dst = waiting_destination("ds-pre-dst", port);
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-preempt off"), "");
    migrates_in_postcopy_to(*dst, port, "ds-pre-src", false);
}

// x-io-timeout lowered on the waiting destination: a source that begins (vmm's magic) and then
// says nothing is given up on after the new limit, not the 30 s the destination started with.
// (A connection that says nothing at all is no source: it is dropped at x-connect-timeout and the
// destination waits on, MalformedStream.AStrayConnectionIsDroppedAndTheRealSourceFollows.)
TEST(DestinationSettings, IoTimeoutLoweredWhileItWaitsIsUsed) {
    VMM_REQUIRE(need::kvm());
    uint16_t port = free_tcp_port();
    auto dst = Vm::start("ds-io-dst", {"-m", "32M", "--smp", "1", "--incoming", tcp_uri(port)});
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_parameter x-io-timeout 500"), "");
    UniqueFd silent = tcp_connect(port);
    ASSERT_TRUE(silent.valid());
    ASSERT_EQ(::send(silent.get(), migration::kMagic.data(), migration::kMagic.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(migration::kMagic.size()));
    // A destination whose incoming migration fails exits (non-zero), having said why.
    auto status = dst->process().wait(std::chrono::seconds(20));
    ASSERT_TRUE(status.has_value()) << "still waiting on a silent source after 20 s:\n" << dst->log();
    EXPECT_NE(*status, 0);
    EXPECT_NE(dst->log().find("was silent for 500 ms"), std::string::npos) << dst->log();
}

}  // namespace vmm::test

namespace vmm::test {

// A plugin's listener takes the settings it is given when it starts listening (its ABI passes
// them once): a change to one of those on the waiting destination is refused in one line that
// says what to do, not shown and ignored; the others change as ever; with --incoming defer the same setting is taken, then migrate_incoming listens.
TEST(DestinationSettings, APluginListenerRefusesAChangeItCouldNotUse) {
    VMM_REQUIRE(need::kvm());
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    std::string uri = local_uri("loop", free_tcp_port());
    auto dst = Vm::start("ds-plugin-dst", {"-m", "32M", "--smp", "1", "--incoming", uri});
    ASSERT_TRUE(dst);
    std::string out = dst->cmd("migrate_set_capability postcopy-ram on");
    EXPECT_NE(out.find("cannot change now"), std::string::npos) << out;
    EXPECT_NE(out.find("--incoming defer"), std::string::npos) << out;
    EXPECT_NE(dst->cmd("info migrate_capabilities").find("postcopy-ram: off"), std::string::npos);
    out = dst->cmd("migrate_set_parameter x-io-timeout 500");
    EXPECT_NE(out.find("cannot change now"), std::string::npos) << out;
    // What the destination reads as its source connects, on any transport, can still change.
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-preempt off"), "");
    EXPECT_EQ(dst->cmd("migrate_set_parameter downtime-limit 50"), "");

    auto deferred = Vm::start("ds-plugin-defer", {"-m", "32M", "--smp", "1", "--incoming", "defer"});
    ASSERT_TRUE(deferred);
    EXPECT_EQ(deferred->cmd("migrate_set_capability postcopy-ram on"), "");
    EXPECT_EQ(deferred->cmd("migrate_incoming " + local_uri("loop", free_tcp_port())), "");
    EXPECT_NE(deferred->cmd("info migrate_capabilities").find("postcopy-ram: on"), std::string::npos);
}

}  // namespace vmm::test
