#include "vmm/machine/vcpu_state.h"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

namespace vmm::machine {

namespace {

constexpr uint32_t kStateVersion = 1;
constexpr size_t kMaxMsrs = 1024;
constexpr size_t kMaxXsave = 1 << 20;

template <typename T>
bool same_bytes(const T& a, const T& b) {
    static_assert(std::is_trivially_copyable_v<T>);
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
void put_struct(ByteWriter& out, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.put_blob({reinterpret_cast<const uint8_t*>(&v), sizeof(T)});
}

template <typename T>
Status get_struct(ByteReader& in, T& v, const char* what) {
    std::vector<uint8_t> b;
    if (auto s = in.get_blob(b, sizeof(T)); !s) return s;
    if (b.size() != sizeof(T)) {
        return Error(fmt::format("vCPU state: {} is {} bytes, expected {}", what, b.size(), sizeof(T)));
    }
    std::memcpy(&v, b.data(), sizeof(T));
    return {};
}

}  // namespace

bool is_clock_msr(uint32_t index) { return index == kMsrTsc || index == kMsrHvTimeRefCount || index == kMsrHvVpRuntime; }

std::string first_difference(const VcpuState& a, const VcpuState& b, bool ignore_clocks) {
    if (!same_bytes(a.regs, b.regs)) return "regs";
    if (!same_bytes(a.sregs, b.sregs)) return "sregs";
    if (!same_bytes(a.fpu, b.fpu)) return "fpu";
    if (a.xsave != b.xsave) {
        for (size_t i = 0; i < std::min(a.xsave.size(), b.xsave.size()); ++i)
            if (a.xsave[i] != b.xsave[i]) return fmt::format("xsave byte {}", i);
        return "xsave size";
    }
    if (!same_bytes(a.xcrs, b.xcrs)) return "xcrs";
    if (!same_bytes(a.events, b.events)) return "events";
    if (!same_bytes(a.mp_state, b.mp_state)) return "mp_state";
    if (!same_bytes(a.debugregs, b.debugregs)) return "debugregs";
    if (a.msrs.size() != b.msrs.size()) return "msr count";
    for (size_t i = 0; i < a.msrs.size(); ++i) {
        if (a.msrs[i].index != b.msrs[i].index) return fmt::format("msr list at {}", i);
        if (ignore_clocks && is_clock_msr(a.msrs[i].index)) continue;
        if (a.msrs[i].data != b.msrs[i].data) {
            return fmt::format("MSR {:#x}: {:#x} vs {:#x}", a.msrs[i].index, a.msrs[i].data, b.msrs[i].data);
        }
    }
    return "";
}

bool same_state(const VcpuState& a, const VcpuState& b, bool ignore_clocks) { return first_difference(a, b, ignore_clocks).empty(); }

Result<VcpuState> save_vcpu_state(kvm::Vcpu& vcpu, const std::vector<uint32_t>& msr_indices,
                                  size_t xsave_size) {
    VcpuState st;
    auto regs = vcpu.get_regs();
    if (!regs) return regs.error();
    st.regs = *regs;
    auto sregs = vcpu.get_sregs();
    if (!sregs) return sregs.error();
    st.sregs = *sregs;
    auto fpu = vcpu.get_fpu();
    if (!fpu) return fpu.error();
    st.fpu = *fpu;
    auto xsave = vcpu.get_xsave(xsave_size);
    if (!xsave) return xsave.error();
    st.xsave = std::move(*xsave);
    auto xcrs = vcpu.get_xcrs();
    if (!xcrs) return xcrs.error();
    st.xcrs = *xcrs;
    auto msrs = vcpu.get_msrs(msr_indices);
    if (!msrs) return msrs.error();
    if (msrs->size() != msr_indices.size()) {
        return Error(fmt::format("KVM_GET_MSRS read {} of {} MSRs", msrs->size(), msr_indices.size()));
    }
    st.msrs = std::move(*msrs);
    auto events = vcpu.get_vcpu_events();
    if (!events) return events.error();
    st.events = *events;
    auto mp = vcpu.get_mp_state();
    if (!mp) return mp.error();
    st.mp_state = *mp;
    auto dr = vcpu.get_debugregs();
    if (!dr) return dr.error();
    st.debugregs = *dr;
    return st;
}

Status load_vcpu_state(kvm::Vcpu& vcpu, const VcpuState& st) {
    // The order QEMU uses: registers, extended state, special registers, MSRs, then events.
    if (auto s = vcpu.set_regs(st.regs); !s) return s;
    if (auto s = vcpu.set_xsave(st.xsave); !s) return s;
    if (auto s = vcpu.set_xcrs(st.xcrs); !s) return s;
    if (auto s = vcpu.set_sregs(st.sregs); !s) return s;
    if (auto s = vcpu.set_msrs(st.msrs); !s) return s;
    if (auto s = vcpu.set_mp_state(st.mp_state); !s) return s;
    kvm_vcpu_events ev = st.events;
    ev.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR |
                KVM_VCPUEVENT_VALID_SHADOW;
    if (auto s = vcpu.set_vcpu_events(ev); !s) return s;
    return vcpu.set_debugregs(st.debugregs);
}

void encode_vcpu_state(ByteWriter& out, const VcpuState& st) {
    out.put(kStateVersion);
    put_struct(out, st.regs);
    put_struct(out, st.sregs);
    put_struct(out, st.fpu);
    out.put_blob(st.xsave);
    put_struct(out, st.xcrs);
    out.put(static_cast<uint32_t>(st.msrs.size()));
    for (const auto& m : st.msrs) {
        out.put(m.index);
        out.put(m.data);
    }
    put_struct(out, st.events);
    put_struct(out, st.mp_state);
    put_struct(out, st.debugregs);
}

Result<VcpuState> decode_vcpu_state(ByteReader& in) {
    VcpuState st;
    uint32_t version = 0;
    if (auto s = in.get(version); !s) return s.error();
    if (version != kStateVersion) return Error(fmt::format("vCPU state: unknown version {}", version));
    if (auto s = get_struct(in, st.regs, "regs"); !s) return s.error();
    if (auto s = get_struct(in, st.sregs, "sregs"); !s) return s.error();
    if (auto s = get_struct(in, st.fpu, "fpu"); !s) return s.error();
    if (auto s = in.get_blob(st.xsave, kMaxXsave); !s) return s.error();
    if (st.xsave.size() < sizeof(kvm_xsave)) return Error("vCPU state: XSAVE area is too short");
    if (auto s = get_struct(in, st.xcrs, "xcrs"); !s) return s.error();
    uint32_t n = 0;
    if (auto s = in.get(n); !s) return s.error();
    if (n > kMaxMsrs) return Error(fmt::format("vCPU state: {} MSRs exceeds the limit of {}", n, kMaxMsrs));
    st.msrs.resize(n);
    for (auto& m : st.msrs) {
        if (auto s = in.get(m.index); !s) return s.error();
        if (auto s = in.get(m.data); !s) return s.error();
    }
    if (auto s = get_struct(in, st.events, "events"); !s) return s.error();
    if (auto s = get_struct(in, st.mp_state, "mp_state"); !s) return s.error();
    if (auto s = get_struct(in, st.debugregs, "debugregs"); !s) return s.error();
    return st;
}

Result<std::vector<uint32_t>> probe_saveable_msrs(kvm::Vcpu& vcpu,
                                                  const std::vector<uint32_t>& candidates) {
    std::vector<uint32_t> ok;
    for (uint32_t index : candidates) {
        auto got = vcpu.get_msrs({index});
        if (!got) return got.error();
        if (got->size() != 1) continue;  // not readable on this host
        if (!vcpu.set_msrs(*got)) continue;  // readable but not restorable
        ok.push_back(index);
    }
    return ok;
}

}  // namespace vmm::machine
