#include "vmm/kvm/vm.h"

#include <sys/mman.h>

#include "vmm/kvm/ioctl.h"

namespace vmm::kvm {

int Vm::check_extension(int cap) const {
    int r = ::ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
    return r < 0 ? 0 : r;
}

Status Vm::enable_cap(uint32_t cap, uint64_t arg0) {
    kvm_enable_cap c{};
    c.cap = cap;
    c.args[0] = arg0;
    return ioctl_status(fd_.get(), KVM_ENABLE_CAP, &c, "KVM_ENABLE_CAP");
}

Status Vm::set_tss_addr(uint64_t addr) {
    return ioctl_status(fd_.get(), KVM_SET_TSS_ADDR, static_cast<unsigned long>(addr),
                        "KVM_SET_TSS_ADDR");
}

Status Vm::set_identity_map_addr(uint64_t addr) {
    return ioctl_status(fd_.get(), KVM_SET_IDENTITY_MAP_ADDR, &addr, "KVM_SET_IDENTITY_MAP_ADDR");
}

Status Vm::set_user_memory_region(const kvm_userspace_memory_region& region) {
    return ioctl_status(fd_.get(), KVM_SET_USER_MEMORY_REGION, &region,
                        "KVM_SET_USER_MEMORY_REGION");
}

Status Vm::get_dirty_log(uint32_t slot, void* bitmap) {
    kvm_dirty_log log{};
    log.slot = slot;
    log.dirty_bitmap = bitmap;
    return ioctl_status(fd_.get(), KVM_GET_DIRTY_LOG, &log, "KVM_GET_DIRTY_LOG");
}

Status Vm::clear_dirty_log(uint32_t slot, uint64_t first_page, uint32_t num_pages, void* bitmap) {
    kvm_clear_dirty_log c{};
    c.slot = slot;
    c.first_page = first_page;
    c.num_pages = num_pages;
    c.dirty_bitmap = bitmap;
    return ioctl_status(fd_.get(), KVM_CLEAR_DIRTY_LOG, &c, "KVM_CLEAR_DIRTY_LOG");
}

Result<uint32_t> Vm::reset_dirty_rings() {
    auto r = checked_ioctl(fd_.get(), KVM_RESET_DIRTY_RINGS, 0, "KVM_RESET_DIRTY_RINGS");
    if (!r) return r.error();
    return static_cast<uint32_t>(*r);
}

Result<kvm_clock_data> Vm::get_clock() {
    kvm_clock_data c{};
    if (auto s = ioctl_status(fd_.get(), KVM_GET_CLOCK, &c, "KVM_GET_CLOCK"); !s) return s.error();
    return c;
}

Status Vm::set_clock(const kvm_clock_data& clock) {
    kvm_clock_data c{};
    c.clock = clock.clock;
    return ioctl_status(fd_.get(), KVM_SET_CLOCK, &c, "KVM_SET_CLOCK");
}

Result<Vcpu> Vm::create_vcpu(uint32_t id, size_t run_mmap_size) {
    auto r = checked_ioctl(fd_.get(), KVM_CREATE_VCPU, static_cast<unsigned long>(id),
                           "KVM_CREATE_VCPU");
    if (!r) return r.error();
    UniqueFd fd(*r);
    auto run = Mapping::map("kvm_run", run_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get());
    if (!run) return run.error();
    return Vcpu(std::move(fd), std::move(*run), id);
}

}  // namespace vmm::kvm
