// Vcpus: a machine's vCPUs: the KVM vCPUs, a runner thread each, the MSRs their saved state
// carries, and the throttle (auto-converge) that kicks them. The machine's RunControl drives them
// as one VcpuGroup; their exits go to the machine (VcpuExitHandler).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/kvm/system.h"
#include "vmm/machine/run_control.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/machine/vcpu_state.h"
#include "vmm/machine/vcpu_throttle.h"
#include "vmm/memory/dirty_tracker.h"

namespace vmm::machine {

class Vcpus final : public VcpuGroup {
public:
    Vcpus() : throttle_(std::make_unique<VcpuThrottle>(runners_)) {}
    ~Vcpus() override { stop(); }
    Vcpus(const Vcpus&) = delete;
    Vcpus& operator=(const Vcpus&) = delete;

    // `count` vCPUs with the host's CPUID (each its own APIC id), attached to `tracker` (the
    // dirty ring's), their runner threads started, their exits going to `exits`.
    Status create(const kvm::System& kvm, kvm::Vm& vm, memory::DirtyTracker& tracker, uint32_t count,
                  VcpuExitHandler& exits);
    // The throttle stopped, then every runner's thread joined: before devices and memory go.
    void stop();

    // Every vCPU's state; each must be out of the guest (the machine paused).
    Result<std::vector<VcpuState>> save() const;
    Status load(const std::vector<VcpuState>& states);
    size_t count() const { return vcpus_.size(); }
    kvm::Vcpu& vcpu(size_t i) { return *vcpus_[i]; }
    // Each vCPU thread's id, in vCPU order (0 for one not started).
    std::vector<uint32_t> tids() const;
    // The guest's own sleep (the control device), interruptible by a pause.
    void sleep(uint32_t cpu, uint64_t ns);
    // Auto-converge: each vCPU sleeps `percent` of the time (0 = off; vcpu_throttle.h).
    void set_throttle(uint32_t percent) {
        if (throttle_) throttle_->set(percent);
    }
    uint32_t throttle() const { return throttle_ ? throttle_->percent() : 0; }
    // A dirty limit's: one vCPU sleeps `percent` of the time (the higher of this and set_throttle's).
    void set_vcpu_throttle(size_t cpu, uint32_t percent) {
        if (throttle_) throttle_->set_vcpu(cpu, percent);
    }
    std::vector<uint32_t> vcpu_throttles() const { return throttle_ ? throttle_->vcpu_percents() : std::vector<uint32_t>{}; }

    // VcpuGroup, for the machine's RunControl: every runner at once.
    void request_run() override;
    void request_pause() override;
    void wait_not_running() override;
    void request_stop() override;

private:
    std::vector<std::unique_ptr<kvm::Vcpu>> vcpus_;
    std::vector<std::unique_ptr<VcpuRunner>> runners_;
    std::vector<uint32_t> msrs_;
    size_t xsave_size_ = 0;
    std::unique_ptr<VcpuThrottle> throttle_;  // kicks runners_: stopped before them
};

}  // namespace vmm::machine
