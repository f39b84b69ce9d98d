// PinnedAhead: a destination told rdma-pin-all pins its RAM while it waits for the source.
//
// Under rdma-pin-all both sides register their RAM whole before the first write (spec: "RAM
// BLOCKS REQUEST"). The destination's half is the longer one: its RAM has never been touched,
// so pinning it faults in and zeroes every page, and the source, waiting for the RAM BLOCKS
// RESULT, pays for it inside its setup (QEMU's destination does the same). A destination whose
// operator set rdma-pin-all before it started listening (as libvirt sets a migration's
// capabilities at both ends) knows that it will be asked, and has nothing else to do while it
// waits: it allocates a PD on the listening device and pins each block on a thread of its own.
// The accepted connection's channel 0 is made on that PD, and the RAM BLOCKS REQUEST takes the
// pinned blocks (waiting for the thread if it is still at work) instead of pinning then.
//
// Only the listening device can be used: a listener bound to a wildcard address has none until
// a request arrives, and pins nothing ahead. A source that does not ask for rdma-pin-all gets
// dynamic registration and the blocks are unpinned (release). A destination with postcopy-ram
// on pins nothing ahead: a recovery's listener must never touch RAM that userfaultfd guards.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "proto/chunks.h"
#include "verbs.h"

namespace rdma_migrate {

class PinnedAhead {
public:
    // Allocates a PD on `device` and starts pinning `blocks` (remote write, as the RAM BLOCKS
    // REQUEST would) on a thread. Fails only if the PD cannot be made.
    static Result<std::shared_ptr<PinnedAhead>> start(ibv_context* device, std::vector<LocalBlock> blocks);
    ~PinnedAhead();  // stops between blocks, joins the thread; the MRs go before the PD
    PinnedAhead(const PinnedAhead&) = delete;
    PinnedAhead& operator=(const PinnedAhead&) = delete;

    ibv_pd* pd() const { return pd_.get(); }
    // The pinned blocks, one MR per block of `blocks` (the same blocks, in order), once the
    // thread is done; nullopt if pinning failed (logged), the blocks differ or they
    // were taken or released already. The caller's MRs must go before this object does.
    std::optional<std::vector<MemoryRegion>> take(const std::vector<LocalBlock>& blocks);
    // Unpins whatever was pinned (a source that did not ask for rdma-pin-all).
    void release();
    // How long pinning took (0 until done).
    double pin_ms() const { return pin_ms_; }

private:
    PinnedAhead(ProtectionDomain pd, std::vector<LocalBlock> blocks) : pd_(std::move(pd)), blocks_(std::move(blocks)) {}
    void pin() noexcept;  // the thread's body
    void join();

    ProtectionDomain pd_;  // first: destroyed last, after every MR on it
    std::vector<LocalBlock> blocks_;
    std::vector<MemoryRegion> mrs_;  // filled by the thread; read only after join()
    double pin_ms_ = 0;              // likewise
    std::atomic<bool> stop_{false};
    std::thread thread_;  // last: joined before the members above go
};

}  // namespace rdma_migrate
