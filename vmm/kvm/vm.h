// Vm: the VM file descriptor. One method per VM ioctl.
#pragma once

#include "vmm/kvm/uapi.h"

#include <cstdint>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/kvm/vcpu.h"

namespace vmm::kvm {

class Vm {
public:
    explicit Vm(UniqueFd fd) : fd_(std::move(fd)) {}

    int fd() const { return fd_.get(); }
    int check_extension(int cap) const;                               // KVM_CHECK_EXTENSION
    Status enable_cap(uint32_t cap, uint64_t arg0 = 0);               // KVM_ENABLE_CAP
    Status set_tss_addr(uint64_t addr);                               // KVM_SET_TSS_ADDR
    Status set_identity_map_addr(uint64_t addr);                      // KVM_SET_IDENTITY_MAP_ADDR
    Status set_user_memory_region(const kvm_userspace_memory_region& region);
    Status get_dirty_log(uint32_t slot, void* bitmap);                // KVM_GET_DIRTY_LOG
    Status clear_dirty_log(uint32_t slot, uint64_t first_page, uint32_t num_pages,
                           void* bitmap);                             // KVM_CLEAR_DIRTY_LOG
    Result<uint32_t> reset_dirty_rings();                             // KVM_RESET_DIRTY_RINGS
    Result<kvm_clock_data> get_clock();                               // KVM_GET_CLOCK
    Status set_clock(const kvm_clock_data& clock);                    // KVM_SET_CLOCK
    Result<Vcpu> create_vcpu(uint32_t id, size_t run_mmap_size);      // KVM_CREATE_VCPU

private:
    UniqueFd fd_;
};

}  // namespace vmm::kvm
