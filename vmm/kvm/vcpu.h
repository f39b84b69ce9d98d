// Vcpu: a vCPU file descriptor and its kvm_run mapping. One method per vCPU ioctl.
#pragma once

#include "vmm/kvm/uapi.h"

#include <cstdint>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/mapping.h"
#include "vmm/common/result.h"

namespace vmm::kvm {

// Outcome of one KVM_RUN: the guest exited (read run()->exit_reason), or the call was
// interrupted before or during guest execution (a signal or immediate_exit).
enum class RunOutcome { exited, interrupted };

class Vcpu {
public:
    Vcpu(UniqueFd fd, Mapping run, uint32_t id)
        : fd_(std::move(fd)), run_(std::move(run)), id_(id) {}

    uint32_t id() const { return id_; }
    int fd() const { return fd_.get(); }
    kvm_run* run_struct() const { return run_.as<kvm_run>(); }

    Result<RunOutcome> run();                                   // KVM_RUN
    Result<kvm_regs> get_regs();                                // KVM_GET_REGS
    Status set_regs(const kvm_regs& regs);                      // KVM_SET_REGS
    Result<kvm_sregs> get_sregs();                              // KVM_GET_SREGS
    Status set_sregs(const kvm_sregs& sregs);                   // KVM_SET_SREGS
    Result<kvm_fpu> get_fpu();                                  // KVM_GET_FPU
    Status set_fpu(const kvm_fpu& fpu);                         // KVM_SET_FPU
    // KVM_GET_XSAVE2 when the kernel's area is larger than struct kvm_xsave, else KVM_GET_XSAVE.
    Result<std::vector<uint8_t>> get_xsave(size_t xsave_size);
    Status set_xsave(const std::vector<uint8_t>& area);         // KVM_SET_XSAVE
    Result<kvm_xcrs> get_xcrs();                                // KVM_GET_XCRS
    Status set_xcrs(const kvm_xcrs& xcrs);                      // KVM_SET_XCRS
    // KVM_GET_MSRS for `indices`; returns the (index, value) pairs the kernel filled.
    Result<std::vector<kvm_msr_entry>> get_msrs(const std::vector<uint32_t>& indices);
    Status set_msrs(const std::vector<kvm_msr_entry>& entries);  // KVM_SET_MSRS
    Result<kvm_vcpu_events> get_vcpu_events();                  // KVM_GET_VCPU_EVENTS
    Status set_vcpu_events(const kvm_vcpu_events& events);      // KVM_SET_VCPU_EVENTS
    Result<kvm_mp_state> get_mp_state();                        // KVM_GET_MP_STATE
    Status set_mp_state(const kvm_mp_state& state);             // KVM_SET_MP_STATE
    Result<kvm_debugregs> get_debugregs();                      // KVM_GET_DEBUGREGS
    Status set_debugregs(const kvm_debugregs& regs);            // KVM_SET_DEBUGREGS
    Status set_cpuid2(const std::vector<kvm_cpuid_entry2>& entries);  // KVM_SET_CPUID2
    // mmap of this vCPU's dirty ring (KVM_CAP_DIRTY_LOG_RING), `bytes` long.
    Result<Mapping> map_dirty_ring(size_t bytes);

private:
    UniqueFd fd_;
    Mapping run_;
    uint32_t id_;
};

}  // namespace vmm::kvm
