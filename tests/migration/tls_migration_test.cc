// Migration over TLS (tls-creds, tls-hostname, tls-authz), through the monitors as a person
// types them: every connection of a tcp/unix migration is a TLS 1.3 session with both sides
// authenticated (transport/tls_stream.h). The PKIs come from scripts/make-test-pki.sh; one
// peer nobody here wrote (gnutls-cli) knocks on a destination too.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

#include "tests/support/postcopy.h"
#include "tests/support/qemu.h"
#include "tests/support/require.h"
#include "tests/support/test_pki.h"

namespace vmm::test {

namespace {

// Credentials for the tests, made once: `good` (the CA both sides trust, a destination
// certificate for localhost and 127.0.0.1, a source one CN=vmm-source), `foreign` (another
// CA's), `expired` (good's CA, certificates that expired in 2020) and `renamed` (good's CA, a
// source named CN=intruder).
class Pki {
public:
    static const Pki& get() {
        static Pki pki;
        return pki;
    }
    std::string good, foreign, expired, renamed;
    bool made = false;

private:
    Pki() : dirs_("vmm-tls-test") {
        good = dirs_.make("good"), foreign = dirs_.make("foreign");
        expired = dirs_.make("expired", "--ca " + good + " --expired");
        renamed = dirs_.make("renamed", "--ca " + good + " --client intruder");
        made = !good.empty() && !foreign.empty() && !expired.empty() && !renamed.empty();
    }
    TestPki dirs_;
};

#define VMM_REQUIRE_PKI()                                       \
    do {                                                        \
        VMM_REQUIRE(need::kvm(), need::certtool());             \
        ASSERT_TRUE(Pki::get().made) << "make-test-pki.sh failed"; \
    } while (0)

void set(Vm& vm, const std::string& name, const std::string& value) {
    EXPECT_EQ(vm.cmd("migrate_set_parameter " + name + " " + value), "") << name;
}

std::unique_ptr<Vm> tls_destination(const std::string& name, const std::string& uri, const std::string& creds) {
    auto dst = Vm::start(name, {"-m", "128M", "--smp", "1", "-S", "--incoming", uri});
    if (dst) set(*dst, "tls-creds", creds);
    return dst;
}

std::unique_ptr<Vm> tls_source(const std::string& name, const std::string& creds) {
    auto src = stress_source(name, sized("8M", "1M"));
    if (src && !creds.empty()) set(*src, "tls-creds", creds);
    return src;
}

// Runs the migration to its end; its status.
std::string migrate(Vm& src, const std::string& uri) {
    EXPECT_EQ(src.cmd("migrate -d " + uri), "");
    EXPECT_TRUE(eventually([&] { return src.migrate_status() == "completed" || src.migrate_status() == "failed"; }, 300));
    return src.migrate_status();
}

void migrates_over_tls(Vm& src, Vm& dst, const std::string& uri) {
    ASSERT_EQ(migrate(src, uri), "completed") << src.cmd("info migrate") << dst.log();
    ASSERT_TRUE(eventually([&] { return dst.migrate_status() == "completed"; }, 60)) << dst.cmd("info migrate");
    expect_handover(src, dst);
    EXPECT_NE(src.log().find("TLS 1.3"), std::string::npos) << src.log();
}

// A refused source: failed with `why` in its one line, its guest running on; the destination
// wrote nothing to guest RAM and still waits.
void refused(Vm& src, Vm& dst, const std::string& uri, const std::string& why) {
    ASSERT_EQ(migrate(src, uri), "failed") << dst.log();
    std::string error = src.migrate_field("error");
    EXPECT_NE(error.find("TLS"), std::string::npos) << error;
    if (!why.empty()) {
        EXPECT_NE((error + dst.log()).find(why), std::string::npos) << error << "\n" << dst.log();
    }
    EXPECT_EQ(src.status(), "running");
    EXPECT_EQ(dst.migrate_status(), "none") << "the destination took it: " << dst.cmd("info migrate");
}

// A TLS destination NAME-dst on `port` and a source NAME-src with `creds`, `adjust` typed on
// their monitors, then the source refused naming `why` (refused()); the destination, which still
// waits, for a test that goes on.
std::unique_ptr<Vm> source_refused(const std::string& name, uint16_t port, const std::string& creds,
                                   const std::function<void(Vm& src, Vm& dst)>& adjust, const std::string& why) {
    auto dst = tls_destination(name + "-dst", tcp_uri(port), Pki::get().good);
    auto src = tls_source(name + "-src", creds);
    if (!src || !dst) {
        ADD_FAILURE() << "could not start the pair";
        return nullptr;
    }
    if (adjust) adjust(*src, *dst);
    refused(*src, *dst, tcp_uri(port), why);
    return dst;
}

}  // namespace

TEST(TlsMigration, OverTcpBothSidesAuthenticatedAndRamEqual) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-tcp-dst", tcp_uri(port), Pki::get().good);
    auto src = tls_source("tls-tcp-src", Pki::get().good);
    ASSERT_TRUE(src && dst);
    set(*dst, "tls-authz", "vmm-source");
    migrates_over_tls(*src, *dst, tcp_uri(port));
}

// A unix socket has no host name: the source names the destination's (tls-hostname).
TEST(TlsMigration, OverUnixWithTheHostnameNamed) {
    VMM_REQUIRE_PKI();
    std::string path = std::filesystem::temp_directory_path() / ("vmm-tls-" + std::to_string(::getpid()) + ".sock");
    auto dst = tls_destination("tls-unix-dst", "unix:" + path, Pki::get().good);
    auto src = tls_source("tls-unix-src", Pki::get().good);
    ASSERT_TRUE(src && dst);
    set(*src, "tls-hostname", "localhost");
    migrates_over_tls(*src, *dst, "unix:" + path);
}

// Every multifd lane is a TLS session of its own.
TEST(TlsMigration, MultifdEveryLaneATlsSession) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-mfd-dst", tcp_uri(port), Pki::get().good);
    auto src = tls_source("tls-mfd-src", Pki::get().good);
    ASSERT_TRUE(src && dst);
    for (Vm* vm : {src.get(), dst.get()}) EXPECT_EQ(vm->cmd("migrate_set_capability multifd on"), "");
    set(*src, "multifd-channels", "3");
    migrates_over_tls(*src, *dst, tcp_uri(port));
    EXPECT_NE(dst->log().find("3 multifd lanes"), std::string::npos) << dst->log();
}

// Postcopy with preempt over TLS, each side renewing its key every 8 records (as often as a
// receiver takes: GnuTLS refuses more than 8 KeyUpdates a second) while the return path is
// open: the keys change under both directions' traffic and nothing breaks (QEMU's GnuTLS
// sessions failed at GnuTLS's own rekey after ~64 GB; ours never make the reader write).
TEST(TlsMigration, PostcopyWithPreemptAndKeyUpdatesEvery8Records) {
    VMM_REQUIRE_PKI();
    VMM_REQUIRE(need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-pc-dst", tcp_uri(port), Pki::get().good);
    auto src = tls_source("tls-pc-src", Pki::get().good);
    ASSERT_TRUE(src && dst);
    EXPECT_EQ(dst->cmd("migrate_set_capability postcopy-ram on"), "");
    for (Vm* vm : {src.get(), dst.get()}) set(*vm, "x-tls-rekey-records", "8");
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port), sized("16m", "4m"), sized("4m", "1m"));
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed" || src->migrate_status() == "failed"; }, 300));
    ASSERT_EQ(src->migrate_status(), "completed") << src->cmd("info migrate") << dst->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate");
    expect_handover(*src, *dst);
    std::string info = src->cmd("info migrate");
    EXPECT_GE(std::stoull(text_field(info, "tls key updates")), 3u) << info;
    EXPECT_GT(std::stoull(text_field(dst->cmd("info migrate"), "postcopy missing pages")), 0u) << dst->cmd("info migrate");
}

// A paused postcopy (migrate_pause) resumes over a new TLS connection and its preempt one.
TEST(TlsMigration, APausedPostcopyRecoversOverTls) {
    VMM_REQUIRE_PKI();
    VMM_REQUIRE(need::userfaultfd());
    uint16_t port = free_tcp_port();
    auto src = stress_source("tls-rec-src", "32M");
    auto dst = postcopy_destination("tls-rec-dst", tcp_uri(port), "128M", "1", false);
    ASSERT_TRUE(src && dst);
    for (Vm* vm : {src.get(), dst.get()}) set(*vm, "tls-creds", Pki::get().good);  // the listener reads it at connect
    keep_the_push_slow(*src);
    migrate_switching_after_bulk(*src, tcp_uri(port));
    // In postcopy: a pause before the switch would pause the precopy (it resumes too).
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "postcopy-active"; }, 120)) << src->cmd("info migrate");
    ASSERT_EQ(src->cmd("migrate_pause"), "");
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "postcopy-paused"; }, 60)) << dst->cmd("info migrate");
    recover_and_complete(*src, *dst);
    if (HasFatalFailure()) return;
    EXPECT_EQ(number(*dst, "postcopy recoveries"), 1u) << dst->cmd("info migrate");
    EXPECT_NE(src->log().find("postcopy resumed over destination"), std::string::npos) << src->log();
    EXPECT_NE(src->log().find("over TLS 1.3"), std::string::npos) << src->log();
}

TEST(TlsMigration, ASourceSignedByAnotherCaIsRefused) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = source_refused("tls-ca", port, Pki::get().foreign, {}, "");
    ASSERT_TRUE(dst);
    // The destination goes on waiting, and takes its real source.
    auto real = tls_source("tls-ca-real", Pki::get().good);
    ASSERT_TRUE(real);
    migrates_over_tls(*real, *dst, tcp_uri(port));
}

TEST(TlsMigration, AnExpiredSourceCertificateIsRefused) {
    VMM_REQUIRE_PKI();
    source_refused("tls-exp", free_tcp_port(), Pki::get().expired, {}, "expired");
}

TEST(TlsMigration, ASourceTlsAuthzDoesNotNameIsRefused) {
    VMM_REQUIRE_PKI();
    // CN=intruder, signed by the right CA
    source_refused("tls-authz", free_tcp_port(), Pki::get().renamed,
                   [](Vm&, Vm& dst) { set(dst, "tls-authz", "vmm-source;CN=backup-*"); }, "tls-authz");
}

TEST(TlsMigration, ADestinationWhoseNameDiffersFromTlsHostnameIsRefused) {
    VMM_REQUIRE_PKI();
    source_refused("tls-host", free_tcp_port(), Pki::get().good,
                   [](Vm& src, Vm&) { set(src, "tls-hostname", "elsewhere.example"); }, "does not match");
}

// Plaintext to a TLS destination, and TLS to a plaintext one: each refused in one line.
TEST(TlsMigration, PlaintextAndTlsDoNotMeet) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-plain-dst", tcp_uri(port), Pki::get().good);
    auto plain = tls_source("tls-plain-src", "");
    ASSERT_TRUE(plain && dst);
    ASSERT_EQ(migrate(*plain, tcp_uri(port)), "failed");
    EXPECT_EQ(plain->status(), "running");
    EXPECT_TRUE(eventually([&] { return dst->log().find("plaintext migration stream where TLS was expected") != std::string::npos; }, 10))
        << dst->log();
    EXPECT_EQ(dst->migrate_status(), "none");

    uint16_t other = free_tcp_port();
    auto plain_dst = Vm::start("tls-plain-dst2", {"-m", "128M", "--smp", "1", "-S", "--incoming", tcp_uri(other)});
    auto tls_src = tls_source("tls-plain-src2", Pki::get().good);
    ASSERT_TRUE(plain_dst && tls_src);
    ASSERT_EQ(migrate(*tls_src, tcp_uri(other)), "failed");
    EXPECT_NE(tls_src->migrate_field("error").find("tls-creds"), std::string::npos) << tls_src->migrate_field("error");
    EXPECT_EQ(tls_src->status(), "running");
}

// A transport that carries no TLS (a plugin's: the loop test plugin, as rdma:) is refused while
// tls-creds is set, on either side, rather than used in plaintext behind the user's back.
TEST(TlsMigration, ATransportWithoutTlsIsRefusedWhileTlsCredsIsSet) {
    VMM_REQUIRE_PKI();
    PluginDir plugins(VMM_TEST_PLUGIN_DIR);
    auto src = Vm::start("tls-notls-src", {"-m", "32M", "--smp", "1"});
    ASSERT_TRUE(src);
    set(*src, "tls-creds", Pki::get().good);
    std::string out = src->cmd("migrate " + local_uri("loop", free_tcp_port()));
    EXPECT_NE(out.find("carries no TLS"), std::string::npos) << out;
    EXPECT_EQ(src->status(), "running");

    auto deferred = Vm::start("tls-notls-defer", {"-m", "32M", "--smp", "1", "--incoming", "defer"});
    ASSERT_TRUE(deferred);
    set(*deferred, "tls-creds", Pki::get().good);
    out = deferred->cmd("migrate_incoming " + local_uri("loop", free_tcp_port()));
    EXPECT_NE(out.find("carries no TLS"), std::string::npos) << out;

    auto waiting = Vm::start("tls-notls-dst", {"-m", "32M", "--smp", "1", "--incoming", local_uri("loop", free_tcp_port())});
    ASSERT_TRUE(waiting);
    out = waiting->cmd("migrate_set_parameter tls-creds " + Pki::get().good);
    EXPECT_NE(out.find("carries no TLS"), std::string::npos) << out;
    EXPECT_NE(waiting->cmd("info migrate_parameters").find("tls-creds: \n"), std::string::npos);
}

// gnutls-cli, a TLS client nobody here wrote: without a client certificate the destination
// drops it and waits on; with the source's certificate it is authenticated, and its silence
// afterwards is the migration's problem (as any source that says nothing).
TEST(TlsMigration, GnutlsCliWithoutACertificateCostsTheDestinationNothing) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-cli-dst", tcp_uri(port), Pki::get().good);
    ASSERT_TRUE(dst);
    std::string cli = "gnutls-cli --x509cafile " + Pki::get().good + "/ca-cert.pem -p " + std::to_string(port) +
                      " 127.0.0.1 </dev/null >/dev/null 2>&1";
    (void)std::system(cli.c_str());  // its exit status: 0 even when the server refused it after its Finished
    EXPECT_TRUE(eventually([&] { return dst->log().find("Certificate is required") != std::string::npos; }, 10)) << dst->log();
    EXPECT_EQ(dst->migrate_status(), "none");
    auto src = tls_source("tls-cli-src", Pki::get().good);
    ASSERT_TRUE(src);
    migrates_over_tls(*src, *dst, tcp_uri(port));
}

// Handshakes do not wait on each other (transport/candidates.h): ten clients that connect, say one
// byte of a TLS record and hold their connections open do not keep the real source out, though
// each could hold a handshake for x-connect-timeout (30 s here) and the source gives up on a
// silent destination after x-io-timeout (30 s): one at a time, the source failed.
TEST(TlsMigration, TenClientsHoldingHalfAHandshakeDoNotKeepTheSourceOut) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-held-dst", tcp_uri(port), Pki::get().good);
    ASSERT_TRUE(dst);
    set(*dst, "x-connect-timeout", "30000");
    std::vector<UniqueFd> held;
    for (int i = 0; i < 10; ++i) {
        UniqueFd fd = tcp_connect(port);
        ASSERT_TRUE(fd);
        const char handshake = 0x16;  // the first byte of a TLS handshake record, and no more
        ASSERT_EQ(::send(fd.get(), &handshake, 1, MSG_NOSIGNAL), 1);
        held.push_back(std::move(fd));
    }
    auto src = tls_source("tls-held-src", Pki::get().good);
    ASSERT_TRUE(src);
    migrates_over_tls(*src, *dst, tcp_uri(port));
}

// A connection still short of its first words at x-connect-timeout is cut, said once in the log.
TEST(TlsMigration, AHalfHandshakeIsCutAtTheConnectTimeout) {
    VMM_REQUIRE_PKI();
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-cut-dst", tcp_uri(port), Pki::get().good);
    ASSERT_TRUE(dst);
    set(*dst, "x-connect-timeout", "1000");
    UniqueFd fd = tcp_connect(port);
    ASSERT_TRUE(fd);
    const char handshake = 0x16;
    ASSERT_EQ(::send(fd.get(), &handshake, 1, MSG_NOSIGNAL), 1);
    EXPECT_TRUE(eventually([&] { return dst->log().find("did not begin as a source within 1000 ms") != std::string::npos; }, 30))
        << dst->log();
    char byte;
    EXPECT_EQ(::recv(fd.get(), &byte, 1, 0), 0) << "the destination did not close the connection it cut";
    EXPECT_EQ(dst->migrate_status(), "none");
}

// QEMU 7.2, a TLS migration source nobody here wrote, with the same credential directory (its
// tls-creds-x509 object, endpoint=client): the handshake completes both ways (QEMU checks the
// destination's certificate, the destination QEMU's), and the destination then refuses QEMU's
// stream by name, as over RDMA.
TEST(TlsMigration, QemuAsATlsSourceIsAuthenticatedThenRefusedByName) {
    VMM_REQUIRE_PKI();
    VMM_REQUIRE(need::qemu());
    uint16_t port = free_tcp_port();
    auto dst = tls_destination("tls-qemu-dst", tcp_uri(port), Pki::get().good);
    auto src = Qemu::start("tls-qemu-src", {"-object", "tls-creds-x509,id=tls0,endpoint=client,verify-peer=on,dir=" + Pki::get().good});
    ASSERT_TRUE(dst && src);
    Json params = {{"tls-creds", "tls0"}, {"tls-hostname", "localhost"}};
    Json set_reply = src->qmp("migrate-set-parameters", params);
    ASSERT_FALSE(set_reply.contains("error")) << set_reply.dump();
    Json started = src->qmp("migrate", {{"uri", tcp_uri(port)}});
    ASSERT_FALSE(started.contains("error")) << started.dump();
    EXPECT_EQ(src->migration_outcome(120), "failed") << src->log();
    // Past the handshake, QEMU's stream is named and dropped, and the destination waits on for
    // a source it can load (a stray connection never ends the migration it waits for).
    EXPECT_TRUE(eventually([&] { return dst->log().find("the source sent QEMU's migration stream (magic QEVM") != std::string::npos; }, 60))
        << dst->log();
    std::string log = dst->log();
    EXPECT_NE(log.find("dropped a connection that is not a migration"), std::string::npos) << log;
    EXPECT_EQ(log.find("its TLS handshake failed"), std::string::npos) << log;
    EXPECT_EQ(dst->migrate_status(), "none");
}

}  // namespace vmm::test
