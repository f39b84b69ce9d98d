#include "vmm/stream/cancel.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace vmm::stream {

Result<CancelToken> CancelToken::create() {
    int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) return Error::from_errno("eventfd for migration cancel");
    return CancelToken(UniqueFd(fd));
}

void CancelToken::cancel() {
    cancelled_->store(true);
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(fd_.get(), &one, sizeof(one));
}

}  // namespace vmm::stream
