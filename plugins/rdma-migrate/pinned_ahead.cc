#include "pinned_ahead.h"

#include <fmt/format.h>

#include <chrono>

#include "memory_registry.h"
#include "trace.h"
#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace rdma_migrate {

Result<std::shared_ptr<PinnedAhead>> PinnedAhead::start(ibv_context* device, std::vector<LocalBlock> blocks) {
    ProtectionDomain pd(ibv_alloc_pd(device));
    if (!pd) return verbs_error("ibv_alloc_pd (to pin RAM while waiting)");
    std::shared_ptr<PinnedAhead> p(new PinnedAhead(std::move(pd), std::move(blocks)));
    p->thread_ = std::thread([raw = p.get()] { raw->pin(); });
    return p;
}

PinnedAhead::~PinnedAhead() {
    stop_ = true;
    join();
}

void PinnedAhead::join() {
    if (thread_.joinable()) thread_.join();
}

void PinnedAhead::pin() noexcept {
    vmm::name_this_thread("rdma-pin-ahead");  // not the incoming thread's name: CPU before the migration
    try {
        auto t0 = std::chrono::steady_clock::now();
        auto mrs = MemoryRegistry(pd_.get()).register_blocks(blocks_, Use::pin_all_written, &stop_);
        if (!mrs) {
            if (!stop_) {
                vmm::log::warn("rdma: pinning RAM while waiting for the source failed ({}); it is tried again when the "
                               "source asks", mrs.error().message());
            }
            return;
        }
        mrs_ = std::move(*mrs);
        pin_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        trace("destination: rdma-pin-all: {} RAM block(s) pinned while waiting, in {:.1f} ms", mrs_.size(), pin_ms_);
    } catch (...) {  // bad_alloc: nothing pinned ahead, the request pins as usual
        mrs_.clear();
    }
}

std::optional<std::vector<MemoryRegion>> PinnedAhead::take(const std::vector<LocalBlock>& blocks) {
    join();
    if (mrs_.size() != blocks.size()) return std::nullopt;  // failed, released, taken, or not all
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (mrs_[i]->addr != blocks[i].host || mrs_[i]->length != blocks[i].size) return std::nullopt;
    }
    return std::exchange(mrs_, {});
}

void PinnedAhead::release() {
    stop_ = true;
    join();
    mrs_.clear();
}

}  // namespace rdma_migrate
