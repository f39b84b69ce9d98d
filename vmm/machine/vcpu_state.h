// VcpuState: everything architectural about one x86 vCPU that KVM lets us read and write:
// general registers, special registers, FPU and XSAVE area, XCRs, MSRs (TSC included),
// pending events, MP state and debug registers. Saved while the vCPU is out of KVM_RUN.
//
// The kernel structures are stored as their uapi layouts (fixed, little-endian, part of the
// KVM ABI); encode/decode frame them with explicit lengths and check every length on the way in.
#pragma once

#include "vmm/kvm/uapi.h"

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/bytes.h"
#include "vmm/common/result.h"
#include "vmm/kvm/vcpu.h"

namespace vmm::machine {

constexpr uint32_t kMsrTsc = 0x10;
constexpr uint32_t kMsrHvTimeRefCount = 0x40000020;  // Hyper-V reference counter: a clock, like the TSC
constexpr uint32_t kMsrHvVpRuntime = 0x40000010;     // Hyper-V vCPU run time: advances too
bool is_clock_msr(uint32_t index);

struct VcpuState {
    kvm_regs regs{};
    kvm_sregs sregs{};
    kvm_fpu fpu{};
    std::vector<uint8_t> xsave;
    kvm_xcrs xcrs{};
    std::vector<kvm_msr_entry> msrs;
    kvm_vcpu_events events{};
    kvm_mp_state mp_state{};
    kvm_debugregs debugregs{};
};

// Byte-for-byte equality; `ignore_clocks` skips the MSRs that are clocks (TSC, Hyper-V
// reference counter), which advance even while the vCPU is paused.
bool same_state(const VcpuState& a, const VcpuState& b, bool ignore_clocks);
// The first part that differs ("" when same_state would be true), for diagnostics.
std::string first_difference(const VcpuState& a, const VcpuState& b, bool ignore_clocks);

Result<VcpuState> save_vcpu_state(kvm::Vcpu& vcpu, const std::vector<uint32_t>& msr_indices,
                                  size_t xsave_size);
Status load_vcpu_state(kvm::Vcpu& vcpu, const VcpuState& state);

void encode_vcpu_state(ByteWriter& out, const VcpuState& state);
Result<VcpuState> decode_vcpu_state(ByteReader& in);

// The MSRs of `vcpu` that KVM both reads and writes back unchanged (probed once per machine).
Result<std::vector<uint32_t>> probe_saveable_msrs(kvm::Vcpu& vcpu,
                                                  const std::vector<uint32_t>& candidates);

}  // namespace vmm::machine
