// WholeBlocks: rdma-pin-all's registrations, every RAM block registered whole, on both sides (as
// QEMU does), during setup rather than inside the bulk round: pinning all of RAM is setup work,
// and the rounds that follow register nothing. Kept until unpin (postcopy's switch) or the end.
#pragma once

#include <vector>

#include "memory_registry.h"
#include "proto/chunks.h"
#include "verbs.h"

namespace rdma_migrate {

class WholeBlocks {
public:
    // Every block of `blocks` registered for `use` (remote write on the destination; local read
    // only on the source, which never registers memory for remote access); `side` names it in traces.
    Status pin(const MemoryRegistry& memory, const std::vector<LocalBlock>& blocks, Use use, const char* side);
    // The registrations a destination made while it waited (pinned_ahead.h).
    void adopt(std::vector<MemoryRegion> pinned) { mrs_ = std::move(pinned); }
    void unpin() { mrs_.clear(); }
    const ibv_mr* mr(size_t block) const { return block < mrs_.size() ? mrs_[block].get() : nullptr; }
    // Block i's rkey (0 when it is not pinned): what a second queue pair would need to write it.
    uint32_t rkey(size_t block) const { return block < mrs_.size() ? mrs_[block]->rkey : 0; }

private:
    std::vector<MemoryRegion> mrs_;
};

}  // namespace rdma_migrate
