#include "whole_blocks.h"

#include "trace.h"

namespace rdma_migrate {

Status WholeBlocks::pin(const MemoryRegistry& memory, const std::vector<LocalBlock>& blocks, Use use, const char* side) {
    auto mrs = memory.register_blocks(blocks, use);
    if (!mrs) return mrs.error();
    mrs_ = std::move(*mrs);
    for (const auto& b : blocks) trace("{}: RAM block '{}' registered for rdma-pin-all ({} bytes)", side, b.name, b.size);
    return {};
}

}  // namespace rdma_migrate
