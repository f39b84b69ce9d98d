// MemoryRegistry: the one place the plugin registers memory with the adapter. Control buffers,
// chunks (the source's to read, the destination's to be written) and pin-all's whole blocks all
// come through register_memory(), which calls ibv_reg_mr with the least access the use needs
// and words its failure once; the MemoryRegion it returns deregisters on destruction.
#pragma once

#include <atomic>
#include <cstddef>
#include <string_view>
#include <vector>

#include "proto/chunks.h"

#include "verbs.h"

namespace rdma_migrate {

// What a registration is for; it decides the access and what a failure advises.
enum class Use {
    control_send,     // a control buffer the adapter reads for a SEND
    control_receive,  // a control buffer it writes a received message into
    chunk_read,       // source: guest RAM an RDMA WRITE reads (never exposed to the peer)
    chunk_written,    // destination: guest RAM the source's RDMA WRITEs land in (remote write)
    pin_all_read,     // source, rdma-pin-all: a whole RAM block, local read only
    pin_all_written,  // destination, rdma-pin-all: a whole RAM block, remote write
    postcopy_staging, // source, postcopy: slots the pages are copied into for a write (local read)
    postcopy_landing, // destination, postcopy: the slots the source writes into (remote write)
    postcopy_read,    // source, kCapPostcopyRead: guest RAM the destination reads (remote read)
    pull_served,      // a pull server: the saved guest's file, mapped read-only, that clients read (remote read)
    pull_landing,     // a pulling client: where its READs land (local write)
};

class MemoryRegistry {
public:
    explicit MemoryRegistry(ibv_pd* pd) : pd_(pd) {}
    // Registers [addr, addr + length) for `use`; `what` names it in the error ("chunk 3 of 'pc.ram'").
    Result<MemoryRegion> register_memory(void* addr, size_t length, Use use, std::string_view what) const;
    // rdma-pin-all: each block whole, one MR a block, in order. `stop`, when set, is looked at
    // between blocks and ends the work with an error.
    Result<std::vector<MemoryRegion>> register_blocks(const std::vector<LocalBlock>& blocks, Use use,
                                                      const std::atomic<bool>* stop = nullptr) const;

private:
    ibv_pd* pd_;
};

}  // namespace rdma_migrate
