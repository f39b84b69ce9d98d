// CancelToken: an eventfd that every blocking transport call polls next to its socket, so one
// cancel() (migrate_cancel, quit, a failed peer) unblocks connect, accept, read and write alike.
#pragma once

#include <atomic>
#include <memory>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"

namespace vmm::stream {

class CancelToken {
public:
    static Result<CancelToken> create();
    void cancel();
    bool cancelled() const { return cancelled_->load(); }
    int fd() const { return fd_.get(); }

private:
    CancelToken(UniqueFd fd) : fd_(std::move(fd)), cancelled_(std::make_unique<std::atomic<bool>>(false)) {}
    UniqueFd fd_;
    std::unique_ptr<std::atomic<bool>> cancelled_;
};

}  // namespace vmm::stream
