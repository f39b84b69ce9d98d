#include "vmm/kvm/system.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <memory>

#include "vmm/kvm/ioctl.h"

namespace vmm::kvm {

Result<System> System::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT) {
            return Error::from_errno("open " + path, err,
                                     "load the KVM module (modprobe kvm_intel or kvm_amd) and "
                                     "enable virtualization in the firmware");
        }
        if (err == EACCES || err == EPERM) {
            return Error::from_errno("open " + path, err,
                                     "run as root or add your user to the 'kvm' group");
        }
        return Error::from_errno("open " + path, err);
    }
    System sys{UniqueFd(fd)};
    if (int v = sys.api_version(); v != KVM_API_VERSION) {
        return Error(fmt::format("{}: KVM API version {} is not the supported {}", path, v,
                                 KVM_API_VERSION));
    }
    return sys;
}

int System::api_version() const { return ::ioctl(fd_.get(), KVM_GET_API_VERSION, 0); }

int System::check_extension(int cap) const {
    int r = ::ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
    return r < 0 ? 0 : r;
}

Result<size_t> System::vcpu_mmap_size() const {
    auto r = checked_ioctl(fd_.get(), KVM_GET_VCPU_MMAP_SIZE, 0, "KVM_GET_VCPU_MMAP_SIZE");
    if (!r) return r.error();
    return static_cast<size_t>(*r);
}

Result<std::vector<kvm_cpuid_entry2>> System::supported_cpuid() const {
    // The kernel says E2BIG while the buffer is too small: grow until it fits.
    for (uint32_t n = 64; n <= 4096; n *= 2) {
        size_t bytes = sizeof(kvm_cpuid2) + n * sizeof(kvm_cpuid_entry2);
        auto buf = std::make_unique<uint8_t[]>(bytes);
        auto* c = reinterpret_cast<kvm_cpuid2*>(buf.get());
        c->nent = n;
        if (::ioctl(fd_.get(), KVM_GET_SUPPORTED_CPUID, c) == 0) {
            return std::vector<kvm_cpuid_entry2>(c->entries, c->entries + c->nent);
        }
        if (errno != E2BIG) return Error::from_errno("KVM_GET_SUPPORTED_CPUID");
    }
    return Error("KVM_GET_SUPPORTED_CPUID: more than 4096 entries");
}

Result<std::vector<uint32_t>> System::msr_index_list() const {
    kvm_msr_list probe{};
    probe.nmsrs = 0;
    if (::ioctl(fd_.get(), KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG) {
        return Error::from_errno("KVM_GET_MSR_INDEX_LIST");
    }
    size_t bytes = sizeof(kvm_msr_list) + probe.nmsrs * sizeof(uint32_t);
    auto buf = std::make_unique<uint8_t[]>(bytes);
    auto* list = reinterpret_cast<kvm_msr_list*>(buf.get());
    list->nmsrs = probe.nmsrs;
    if (auto s = ioctl_status(fd_.get(), KVM_GET_MSR_INDEX_LIST, list, "KVM_GET_MSR_INDEX_LIST");
        !s) {
        return s.error();
    }
    return std::vector<uint32_t>(list->indices, list->indices + list->nmsrs);
}

Result<Vm> System::create_vm() const {
    auto r = checked_ioctl(fd_.get(), KVM_CREATE_VM, 0, "KVM_CREATE_VM");
    if (!r) return r.error();
    return Vm(UniqueFd(*r));
}

}  // namespace vmm::kvm
