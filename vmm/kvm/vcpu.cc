#include "vmm/kvm/vcpu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "vmm/kvm/ioctl.h"

namespace vmm::kvm {

namespace {

template <typename T>
Result<T> get_struct(int fd, unsigned long request, const char* name) {
    T value{};
    if (auto s = ioctl_status(fd, request, &value, name); !s) return s.error();
    return value;
}

// kvm_msrs is a header followed by a flexible array: build it in one allocation.
struct MsrBuffer {
    explicit MsrBuffer(size_t n)
        : storage(std::make_unique<uint8_t[]>(sizeof(kvm_msrs) + n * sizeof(kvm_msr_entry))) {
        std::memset(storage.get(), 0, sizeof(kvm_msrs) + n * sizeof(kvm_msr_entry));
        msrs()->nmsrs = static_cast<uint32_t>(n);
    }
    kvm_msrs* msrs() { return reinterpret_cast<kvm_msrs*>(storage.get()); }
    std::unique_ptr<uint8_t[]> storage;
};

}  // namespace

Result<RunOutcome> Vcpu::run() {
    if (::ioctl(fd_.get(), KVM_RUN, 0) < 0) {
        if (errno == EINTR || errno == EAGAIN) return RunOutcome::interrupted;
        return Error::from_errno("KVM_RUN");
    }
    return RunOutcome::exited;
}

Result<kvm_regs> Vcpu::get_regs() { return get_struct<kvm_regs>(fd_.get(), KVM_GET_REGS, "KVM_GET_REGS"); }
Status Vcpu::set_regs(const kvm_regs& r) { return ioctl_status(fd_.get(), KVM_SET_REGS, &r, "KVM_SET_REGS"); }
Result<kvm_sregs> Vcpu::get_sregs() { return get_struct<kvm_sregs>(fd_.get(), KVM_GET_SREGS, "KVM_GET_SREGS"); }
Status Vcpu::set_sregs(const kvm_sregs& s) { return ioctl_status(fd_.get(), KVM_SET_SREGS, &s, "KVM_SET_SREGS"); }
Result<kvm_fpu> Vcpu::get_fpu() { return get_struct<kvm_fpu>(fd_.get(), KVM_GET_FPU, "KVM_GET_FPU"); }
Status Vcpu::set_fpu(const kvm_fpu& f) { return ioctl_status(fd_.get(), KVM_SET_FPU, &f, "KVM_SET_FPU"); }
Result<kvm_xcrs> Vcpu::get_xcrs() { return get_struct<kvm_xcrs>(fd_.get(), KVM_GET_XCRS, "KVM_GET_XCRS"); }
Status Vcpu::set_xcrs(const kvm_xcrs& x) { return ioctl_status(fd_.get(), KVM_SET_XCRS, &x, "KVM_SET_XCRS"); }

Result<std::vector<uint8_t>> Vcpu::get_xsave(size_t xsave_size) {
    size_t size = xsave_size < sizeof(kvm_xsave) ? sizeof(kvm_xsave) : xsave_size;
    std::vector<uint8_t> area(size);
    unsigned long request = size > sizeof(kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE;
    if (auto s = ioctl_status(fd_.get(), request, area.data(), "KVM_GET_XSAVE"); !s) return s.error();
    return area;
}

Status Vcpu::set_xsave(const std::vector<uint8_t>& area) {
    if (area.size() < sizeof(kvm_xsave)) return Error("KVM_SET_XSAVE: XSAVE area is too short");
    return ioctl_status(fd_.get(), KVM_SET_XSAVE, area.data(), "KVM_SET_XSAVE");
}

Result<std::vector<kvm_msr_entry>> Vcpu::get_msrs(const std::vector<uint32_t>& indices) {
    MsrBuffer buf(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) buf.msrs()->entries[i].index = indices[i];
    auto r = checked_ioctl(fd_.get(), KVM_GET_MSRS, buf.msrs(), "KVM_GET_MSRS");
    if (!r) return r.error();
    // The kernel stops at the first MSR it cannot read and returns how many it read.
    auto n = static_cast<size_t>(*r);
    return std::vector<kvm_msr_entry>(buf.msrs()->entries, buf.msrs()->entries + n);
}

Status Vcpu::set_msrs(const std::vector<kvm_msr_entry>& entries) {
    MsrBuffer buf(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) buf.msrs()->entries[i] = entries[i];
    auto r = checked_ioctl(fd_.get(), KVM_SET_MSRS, buf.msrs(), "KVM_SET_MSRS");
    if (!r) return r.error();
    if (static_cast<size_t>(*r) != entries.size()) {
        return Error("KVM_SET_MSRS: the kernel refused MSR " +
                     std::to_string(entries[static_cast<size_t>(*r)].index));
    }
    return {};
}

Result<kvm_vcpu_events> Vcpu::get_vcpu_events() {
    return get_struct<kvm_vcpu_events>(fd_.get(), KVM_GET_VCPU_EVENTS, "KVM_GET_VCPU_EVENTS");
}
Status Vcpu::set_vcpu_events(const kvm_vcpu_events& e) {
    return ioctl_status(fd_.get(), KVM_SET_VCPU_EVENTS, &e, "KVM_SET_VCPU_EVENTS");
}
Result<kvm_mp_state> Vcpu::get_mp_state() {
    return get_struct<kvm_mp_state>(fd_.get(), KVM_GET_MP_STATE, "KVM_GET_MP_STATE");
}
Status Vcpu::set_mp_state(const kvm_mp_state& m) {
    return ioctl_status(fd_.get(), KVM_SET_MP_STATE, &m, "KVM_SET_MP_STATE");
}
Result<kvm_debugregs> Vcpu::get_debugregs() {
    return get_struct<kvm_debugregs>(fd_.get(), KVM_GET_DEBUGREGS, "KVM_GET_DEBUGREGS");
}
Status Vcpu::set_debugregs(const kvm_debugregs& d) {
    return ioctl_status(fd_.get(), KVM_SET_DEBUGREGS, &d, "KVM_SET_DEBUGREGS");
}

Status Vcpu::set_cpuid2(const std::vector<kvm_cpuid_entry2>& entries) {
    size_t bytes = sizeof(kvm_cpuid2) + entries.size() * sizeof(kvm_cpuid_entry2);
    auto storage = std::make_unique<uint8_t[]>(bytes);
    auto* c = reinterpret_cast<kvm_cpuid2*>(storage.get());
    c->nent = static_cast<uint32_t>(entries.size());
    c->padding = 0;
    std::memcpy(c->entries, entries.data(), entries.size() * sizeof(kvm_cpuid_entry2));
    return ioctl_status(fd_.get(), KVM_SET_CPUID2, c, "KVM_SET_CPUID2");
}

Result<Mapping> Vcpu::map_dirty_ring(size_t bytes) {
    auto page = static_cast<off_t>(::sysconf(_SC_PAGESIZE));
    return Mapping::map("KVM dirty ring", bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(),
                        KVM_DIRTY_LOG_PAGE_OFFSET * page);
}

}  // namespace vmm::kvm
