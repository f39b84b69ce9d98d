// Helpers for tests that need /dev/kvm: they skip, saying why, where it is missing.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "tests/support/wait.h"
#include "vmm/machine/machine.h"

namespace vmm::test {

// Empty when /dev/kvm can be opened read-write; otherwise the reason.
std::string kvm_missing_reason();


// True inside the SoftRoCE nested VM (softroce-inside.sh sets VMM_NESTED_TCG): KVM there is nested
// under TCG, where a guest's step and every copy cost far more than under a host's KVM. Tests size
// their guests' work by it, so that what proves a point in seconds under KVM does not take ten
// minutes there.
bool nested_tcg();
// `on_kvm`, or `nested` inside the nested VM: e.g. the stress payload's working set.
inline std::string sized(const std::string& on_kvm, const std::string& nested) {
    return nested_tcg() ? nested : on_kvm;
}
// A short x-connect-timeout (ms) for a test that waits out a dead link: half a second under KVM;
// under nested TCG a loaded source's first bytes may come later than that, and its destination
// would drop it as a silent client.
inline std::string short_connect_timeout() { return sized("500", "5000"); }

// Serial output collected in memory.
struct SerialLog {
    std::mutex mutex;
    std::string text;
    devices::Serial::Sink sink();
    std::string get();
};

machine::MachineSpec small_spec(uint32_t vcpus = 1, uint64_t ram = 64ull << 20);
// Creates and boots; fails the test (returns null) on error.
std::unique_ptr<machine::Machine> boot(const machine::MachineSpec& spec, const std::string& payload,
                                       const std::string& params);

}  // namespace vmm::test
