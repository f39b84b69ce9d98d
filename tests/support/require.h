// What a test needs of the machine, and the one way a test says so:
//     VMM_REQUIRE(need::kvm(), need::userfaultfd());
// skips the test, naming the first need that is missing and what would provide it. Each need is
// checked where it is named: a test asks only for what it uses.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace vmm::need {

std::optional<std::string> kvm();          // a usable /dev/kvm
std::optional<std::string> userfaultfd();  // postcopy's page faults
std::optional<std::string> rdma();         // an RDMA device ($VMM_RDMA_ADDR, the nested VM's)
std::optional<std::string> qemu();         // qemu-system-x86_64, a peer to test against
std::optional<std::string> certtool();     // certtool and gnutls-cli (gnutls-bin): test PKIs, a TLS peer

}  // namespace vmm::need

#define VMM_REQUIRE(...)                                                                    \
    do {                                                                                    \
        for (const std::optional<std::string>& vmm_missing_ : {__VA_ARGS__})                \
            if (vmm_missing_) GTEST_SKIP() << "needs " << *vmm_missing_;                    \
    } while (0)
