#include "tests/support/require.h"

#include <cstdlib>

#include "tests/support/kvm_fixture.h"
#include "vmm/migration/postcopy/userfault.h"

namespace vmm::need {

std::optional<std::string> kvm() {
    if (auto why = test::kvm_missing_reason(); !why.empty()) return "a usable /dev/kvm: " + why;
    return std::nullopt;
}

std::optional<std::string> userfaultfd() {
    if (auto u = migration::Userfault::open(); !u) return "userfaultfd (postcopy): " + u.error().message();
    return std::nullopt;
}

std::optional<std::string> rdma() {
    const char* a = std::getenv("VMM_RDMA_ADDR");
    if (a != nullptr && *a != '\0') return std::nullopt;
    return "an RDMA device ($VMM_RDMA_ADDR): run scripts/softroce-run.sh ctest --test-dir build -L rdma";
}

std::optional<std::string> qemu() {
    if (std::system("command -v qemu-system-x86_64 >/dev/null 2>&1") == 0) return std::nullopt;
    return "qemu-system-x86_64 (Debian package qemu-system-x86) to test against";
}

std::optional<std::string> certtool() {
    if (std::system("command -v certtool >/dev/null 2>&1 && command -v gnutls-cli >/dev/null 2>&1") == 0) return std::nullopt;
    return "certtool and gnutls-cli (Debian package gnutls-bin) for test certificates and a TLS peer";
}

}  // namespace vmm::need
