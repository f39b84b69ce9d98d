// The one place that calls ioctl(2) for the KVM layer and turns failures into Errors.
#pragma once

#include <sys/ioctl.h>

#include <cerrno>

#include "vmm/common/result.h"

namespace vmm::kvm {

// ioctl that retries on EINTR (for calls that must not be interrupted) and names the call.
template <typename Arg>
Result<int> checked_ioctl(int fd, unsigned long request, Arg arg, const char* name) {
    int r;
    do {
        r = ::ioctl(fd, request, arg);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return Error::from_errno(name);
    return r;
}

template <typename Arg>
Status ioctl_status(int fd, unsigned long request, Arg arg, const char* name) {
    auto r = checked_ioctl(fd, request, arg, name);
    if (!r) return r.error();
    return {};
}

}  // namespace vmm::kvm
