// A TLS migration whose source sends through the kernel's TLS (x-tls-kernel), set through the
// monitor as a person types it: the source's stream and guest RAM (spliced, x-zero-copy-local)
// go out as plaintext the kernel encrypts, the destination (GnuTLS) reads them, and the guest
// arrives whole. Label ktls: where this kernel has no TLS the test command runs it in the nested VM.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/postcopy.h"
#include "tests/support/require.h"
#include "tests/support/test_pki.h"
#include "tests/support/vm_pair.h"

namespace vmm::test {
namespace {

std::optional<std::string> kernel_tls() {
    if (std::filesystem::exists("/sys/module/tls")) return std::nullopt;
    return "the kernel's TLS (modprobe tls; the nested VM's kernel has it)";
}

TEST(KernelTlsMigration, TheSourceSendsThroughTheKernelsTlsAndTheGuestArrivesWhole) {
    VMM_REQUIRE(need::kvm(), need::certtool(), kernel_tls());
    TestPki pki("vmm-ktls-migration");
    std::string creds = pki.make("good");
    ASSERT_FALSE(creds.empty()) << "make-test-pki.sh failed";
    std::string uri = "tcp:127.0.0.1:" + std::to_string(free_tcp_port());
    auto dst = Vm::start("ktls-dst", {"-m", "128M", "--smp", "1", "-S", "--incoming", uri});
    ASSERT_TRUE(dst);
    EXPECT_EQ(dst->cmd("migrate_set_parameter tls-creds " + creds), "");
    auto src = stress_source("ktls-src", sized("8M", "1M"));
    ASSERT_TRUE(src);
    EXPECT_EQ(src->cmd("migrate_set_parameter tls-creds " + creds), "");
    EXPECT_EQ(src->cmd("migrate_set_capability x-tls-kernel on"), "");
    EXPECT_EQ(src->cmd("migrate_set_capability x-zero-copy-local on"), "");  // RAM spliced into the kernel's TLS
    // What is tested is the kernel's TLS carrying the stream, not convergence. In the nested VM
    // beside other tests the link once moved 2.5 MB/s while the guest dirtied 2.4 MB/s: 445 rounds
    // in 180 s, each leaving ~1 MB, which with the 229 ms hand-over never fit 300 ms (CI, session 46).
    EXPECT_EQ(src->cmd("migrate_set_parameter downtime-limit 3000"), "");
    EXPECT_EQ(src->cmd("migrate -d " + uri), "");
    // Well inside the test's own limit (300 s), so that a migration that stalls says where it stood.
    ASSERT_TRUE(eventually([&] { return src->migrate_status() == "completed" || src->migrate_status() == "failed"; }, 180))
        << src->cmd("info migrate") << src->log() << dst->cmd("info migrate") << dst->log();
    ASSERT_EQ(src->migrate_status(), "completed") << src->cmd("info migrate") << dst->log();
    ASSERT_TRUE(eventually([&] { return dst->migrate_status() == "completed"; }, 60)) << dst->cmd("info migrate");
    expect_handover(*src, *dst);
    EXPECT_NE(src->log().find("encrypted by the kernel's TLS (x-tls-kernel)"), std::string::npos) << src->log();
    EXPECT_EQ(src->log().find("GnuTLS encrypts what this side sends instead"), std::string::npos) << src->log();
}

}  // namespace
}  // namespace vmm::test
