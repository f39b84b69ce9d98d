// Authenticated RDMA migration (tls-creds over rdma:, kCapTls; docs/rdma-protocol.md,
// "Authenticated migrations"), through the monitors as a person types it: the destination
// waits with `--incoming defer`, gets its credentials, then `migrate_incoming`. Label rdma (and
// kvm): run them in the SoftRoCE nested VM, scripts/softroce-run.sh ctest -R RdmaTls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "rdma_device.h"
#include "tests/support/postcopy.h"
#include "tests/support/require.h"
#include "tests/support/test_pki.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {

namespace {

// `good`: a CA, a destination certificate naming the RDMA address, a source one; `foreign`:
// the same from another CA.
class RdmaPki {
public:
    static const RdmaPki& get() {
        static RdmaPki pki;
        return pki;
    }
    std::string good, foreign;
    bool made() const { return !good.empty() && !foreign.empty(); }

private:
    RdmaPki() : dirs_("vmm-rdma-tls-test") {
        good = dirs_.make("good", "--server " + rdma_addr());
        foreign = dirs_.make("foreign", "--server " + rdma_addr());
    }
    TestPki dirs_;
};

#define VMM_REQUIRE_RDMA_PKI()                                          \
    do {                                                                \
        VMM_REQUIRE(need::kvm(), need::rdma(), need::certtool());       \
        ASSERT_TRUE(RdmaPki::get().made()) << "make-test-pki.sh failed"; \
    } while (0)

const std::vector<std::string> kTlsPattern{"-m", "128M", "--smp", "1", "--guest", "pattern", "--append", "bytes=8M check=64"};

// A destination listening on `uri` with `creds` ("" for none), set before it listens.
std::unique_ptr<Vm> destination_with(const std::string& name, const std::string& uri, const std::string& creds) {
    auto dst = Vm::start(name, {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"});
    if (!dst) return nullptr;
    if (!creds.empty()) {
        EXPECT_EQ(dst->cmd("migrate_set_parameter tls-creds " + creds), "");
    }
    EXPECT_EQ(dst->cmd("migrate_incoming " + uri), "");
    return dst;
}

std::unique_ptr<Vm> source_with(const std::string& name, const std::string& creds) {
    auto src = Vm::start(name, kTlsPattern);
    if (!src) return nullptr;
    EXPECT_TRUE(eventually([&] { return src->guest_value("results") >= 1; }, 120));
    if (!creds.empty()) {
        EXPECT_EQ(src->cmd("migrate_set_parameter tls-creds " + creds), "");
    }
    return src;
}

// The migration's end: "completed" or "failed".
std::string migrate(Vm& src, const std::string& uri) {
    EXPECT_EQ(src.cmd("migrate -d " + uri), "");
    EXPECT_TRUE(eventually([&] { return src.migrate_status() == "completed" || src.migrate_status() == "failed"; }, 300));
    return src.migrate_status();
}

// Completed, authenticated, every page checked against its MAC, RAM equal, the guest runs on.
void migrates_authenticated(Vm& src, Vm& dst, const std::string& uri) {
    ASSERT_EQ(migrate(src, uri), "completed") << src.cmd("info migrate") << dst.log();
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "completed"; }, 60)) << dst.cmd("info migrate");
    EXPECT_NE(src.log().find("authenticated (TLS 1.3 control channel"), std::string::npos) << src.log();
    // verify-ram is off: the sums are there because the connection is authenticated.
    std::string verified = dst.migrate_field("verified ram");
    EXPECT_FALSE(verified.empty()) << dst.cmd("info migrate");
    EXPECT_EQ(dst.migrate_field("error"), "");
    expect_handover(src, dst);
}

}  // namespace

// Dynamic registration, rdma-pin-all, and two queue pairs (the second connects after the
// handshake, on the authenticated connection's PD).
TEST(RdmaTls, AnAuthenticatedMigrationDynamicPinAllAndTwoChannels) {
    VMM_REQUIRE_RDMA_PKI();
    const std::pair<const char*, const char*> modes[] = {{"dynamic", "migrate_set_capability rdma-pin-all off"},
                                                         {"pin-all", "migrate_set_capability rdma-pin-all on"},
                                                         {"channels", "migrate_set_parameter rdma-channels 2"}};
    for (const auto& [mode, setting] : modes) {
        SCOPED_TRACE(mode);
        std::string uri = rdma_uri();
        auto dst = destination_with(std::string("rdma-tls-dst-") + mode, uri, RdmaPki::get().good);
        auto src = source_with(std::string("rdma-tls-src-") + mode, RdmaPki::get().good);
        ASSERT_TRUE(src && dst);
        ASSERT_EQ(src->cmd(setting), "");
        migrates_authenticated(*src, *dst, uri);
        if (std::string(mode) == "channels") {
            EXPECT_NE(src->log().find("2 channels"), std::string::npos) << src->log();
        }
    }
}

// A source with another CA's certificate fails the handshake: the destination grants it no
// rkey and sends no RAM block (its trace shows nothing after the refusal but the wait), logs
// it, and takes the real source afterwards.
TEST(RdmaTls, AForeignCertificateIsRefusedBeforeAnyRkeyAndTheRealSourceFollows) {
    VMM_REQUIRE_RDMA_PKI();
    std::string uri = rdma_uri();
    std::unique_ptr<Vm> dst;
    {
        ScopedEnv trace("VMM_RDMA_TRACE", "1");
        dst = destination_with("rdma-tls-ca-dst", uri, RdmaPki::get().good);
    }
    auto intruder = source_with("rdma-tls-ca-src", RdmaPki::get().foreign);
    ASSERT_TRUE(dst && intruder);
    ASSERT_EQ(migrate(*intruder, uri), "failed") << dst->log();
    EXPECT_NE(intruder->migrate_field("error").find("TLS"), std::string::npos) << intruder->migrate_field("error");
    EXPECT_EQ(intruder->status(), "running");
    ASSERT_TRUE(eventually([&] { return dst->log().find("refused a connection") != std::string::npos; }, 30)) << dst->log();
    std::string before = dst->log();
    EXPECT_EQ(before.find("RAM BLOCKS RESULT"), std::string::npos) << before;
    EXPECT_EQ(before.find("rkey"), std::string::npos) << before;
    EXPECT_EQ(dst->migrate_status(), "none");

    auto real = source_with("rdma-tls-ca-real", RdmaPki::get().good);
    ASSERT_TRUE(real);
    migrates_authenticated(*real, *dst, uri);
    EXPECT_NE(dst->log().find("-> RAM BLOCKS RESULT in TLS"), std::string::npos) << dst->log();
}

// A plaintext source to an authenticated destination is turned away at the RDMA-CM request
// with the destination's reason (so is QEMU's); the destination waits on. The other way round,
// an authenticated source refuses a destination that does not grant it.
TEST(RdmaTls, PlaintextAndAuthenticatedDoNotMeet) {
    VMM_REQUIRE_RDMA_PKI();
    std::string uri = rdma_uri();
    auto dst = destination_with("rdma-tls-plain-dst", uri, RdmaPki::get().good);
    auto plain = source_with("rdma-tls-plain-src", "");
    ASSERT_TRUE(dst && plain);
    ASSERT_EQ(migrate(*plain, uri), "failed");
    EXPECT_NE(plain->migrate_field("error").find("did not offer an authenticated migration"), std::string::npos)
        << plain->migrate_field("error");
    EXPECT_EQ(plain->status(), "running");
    EXPECT_EQ(dst->migrate_status(), "none");
    ASSERT_EQ(plain->cmd("migrate_set_parameter tls-creds " + RdmaPki::get().good), "");
    migrates_authenticated(*plain, *dst, uri);

    std::string other = rdma_uri();
    auto plain_dst = destination_with("rdma-tls-plain-dst2", other, "");
    auto tls_src = source_with("rdma-tls-plain-src2", RdmaPki::get().good);
    ASSERT_TRUE(plain_dst && tls_src);
    ASSERT_EQ(migrate(*tls_src, other), "failed");
    EXPECT_NE(tls_src->migrate_field("error").find("does not authenticate RDMA migrations"), std::string::npos)
        << tls_src->migrate_field("error");
    EXPECT_EQ(tls_src->status(), "running");
}

// Postcopy over an authenticated connection, as a person runs it: both sides get tls-creds and
// postcopy-ram, the switch comes after the bulk round, migrate_pause cuts the link, and the
// recovery's new connection runs a handshake (and so has keys) of its own. The destination
// holds the guest paused, so the pages it lacks come by the push and by the faults its RAM
// digest makes after the recovery; each is tagged, and it ends with exactly the source's RAM.
// With `reads` (x-rdma-postcopy-read at both ends) those faults are RDMA READs, each page
// checked against the tag the source made of it when it exposed its region; with `push`
// (x-rdma-postcopy-read-push at the source) the destination reads the push too, each page of
// it checked the same way.
namespace {
void authenticated_postcopy(const std::string& name, bool reads, bool push = false) {
    const std::string& creds = RdmaPki::get().good;
    std::string uri = rdma_uri();
    auto dst = Vm::start(name + "-dst", {"-m", "128M", "--smp", "1", "-S", "--incoming", "defer"});
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_parameter tls-creds " + creds), "");
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-ram on"), "");
    if (reads) {
        EXPECT_EQ(dst->cmd("migrate_set_capability x-rdma-postcopy-read on"), "");
    }
    EXPECT_EQ(dst->cmd("migrate_incoming " + uri), "");
    auto src = Vm::start(name + "-src", {"--guest", "stress", "-m", "128M", "--smp", "1", "--append", "bytes=8M"});
    ASSERT_TRUE(src);
    ASSERT_TRUE(eventually([&] { return src->guest_value("steps") >= 1; }, 120)) << src->log();
    EXPECT_EQ(src->cmd("migrate_set_parameter tls-creds " + creds), "");
    if (reads) {
        EXPECT_EQ(src->cmd("migrate_set_capability x-rdma-postcopy-read on"), "");
    }
    if (push) {
        EXPECT_EQ(src->cmd("migrate_set_capability x-rdma-postcopy-read-push on"), "");
    }
    migrate_switching_after_bulk(*src, uri, "0", "256k");
    auto reaches = [](Vm& vm, const char* status, int seconds) {
        return eventually([&] { return vm.migrate_status() == status; }, seconds);
    };
    ASSERT_TRUE(reaches(*src, "postcopy-active", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    ASSERT_TRUE(reaches(*dst, "postcopy-active", 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_NE(src->log().find(reads ? "the postcopy channel's messages, writes and pages read by RDMA READ tagged"
                                    : "the postcopy channel's messages and writes tagged"),
              std::string::npos)
        << src->log();
    if (reads) {
        EXPECT_NE(src->log().find(push ? "faults and the push by RDMA READ" : "faults by RDMA READ"), std::string::npos)
            << src->log();
    }
    std::string at_switch = src->ramhash();
    ASSERT_NO_FATAL_FAILURE(pause_and_recover(*src, *dst, rdma_uri()));
    ASSERT_TRUE(reaches(*src, "postcopy-active", 60)) << src->cmd("info migrate") << src->log() << dst->log();
    EXPECT_EQ(dst->ramhash(), at_switch) << "the destination's RAM, faulted in over the recovered link, differs"
                                         << dst->log();
    ASSERT_TRUE(reaches(*src, "completed", 300)) << src->cmd("info migrate") << src->log() << dst->log();
    ASSERT_TRUE(reaches(*dst, "completed", 60)) << dst->cmd("info migrate") << dst->log();
    EXPECT_EQ(number(*src, "postcopy recoveries"), 1u) << src->cmd("info migrate");
    uint64_t faults = number(*dst, "postcopy requests");
    EXPECT_GT(faults, 0u) << dst->cmd("info migrate");
    if (reads) {
        EXPECT_LT(number(*src, "postcopy requests"), faults) << "every fault reached the source: none was read";
    }
    if (push) {  // every missing page lay in a region told, over both connections
        EXPECT_EQ(number(*src, "postcopy pushed"), 0u) << src->cmd("info migrate");
        EXPECT_NE(dst->log().find("x-rdma-postcopy-read-push: this side read "), std::string::npos) << dst->log();
    }
    EXPECT_EQ(dst->ramhash(), at_switch);
    EXPECT_EQ(dst->migrate_field("error"), "");
}
}  // namespace

TEST(RdmaTls, AnAuthenticatedPostcopyIsTaggedAndRecoversOverANewHandshake) {
    VMM_REQUIRE_RDMA_PKI();
    VMM_REQUIRE(need::userfaultfd());
    authenticated_postcopy("rdma-tls-pc", false);
}

// x-rdma-postcopy-read on an authenticated link (issue 64 item 2): faults read by RDMA READ,
// each page checked against its tag, across a recovery whose new connection tags anew.
TEST(RdmaTls, AnAuthenticatedPostcopyReadsFaultsByReadEachPageTagged) {
    VMM_REQUIRE_RDMA_PKI();
    VMM_REQUIRE(need::userfaultfd());
    authenticated_postcopy("rdma-tls-pcread", true);
}

// x-rdma-postcopy-read-push on an authenticated link: the destination reads the push itself,
// each page checked against its tag, across a recovery whose new connection tells its regions
// (and their tags) anew.
TEST(RdmaTls, AnAuthenticatedPostcopyReadsThePushEachPageTagged) {
    VMM_REQUIRE_RDMA_PKI();
    VMM_REQUIRE(need::userfaultfd());
    authenticated_postcopy("rdma-tls-pcpull", true, true);
}

}  // namespace vmm::test
