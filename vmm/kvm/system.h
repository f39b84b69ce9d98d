// System: /dev/kvm. One method per system ioctl (Documentation/virt/kvm/api.rst, section 4).
#pragma once

#include "vmm/kvm/uapi.h"

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/kvm/vm.h"

namespace vmm::kvm {

class System {
public:
    // Opens the device; a missing or inaccessible device gives one line saying what to do.
    static Result<System> open(const std::string& path = "/dev/kvm");

    int fd() const { return fd_.get(); }
    int api_version() const;                        // KVM_GET_API_VERSION
    int check_extension(int cap) const;             // KVM_CHECK_EXTENSION (0 when absent)
    Result<size_t> vcpu_mmap_size() const;          // KVM_GET_VCPU_MMAP_SIZE
    Result<std::vector<kvm_cpuid_entry2>> supported_cpuid() const;  // KVM_GET_SUPPORTED_CPUID
    Result<std::vector<uint32_t>> msr_index_list() const;           // KVM_GET_MSR_INDEX_LIST
    Result<Vm> create_vm() const;                   // KVM_CREATE_VM

private:
    explicit System(UniqueFd fd) : fd_(std::move(fd)) {}
    UniqueFd fd_;
};

}  // namespace vmm::kvm
