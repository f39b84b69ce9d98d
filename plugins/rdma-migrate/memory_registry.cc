#include "memory_registry.h"

#include <fmt/format.h>

namespace rdma_migrate {

namespace {

int access_for(Use use) {
    switch (use) {
        case Use::control_send:
        case Use::chunk_read:
        case Use::pin_all_read:
        case Use::postcopy_staging: return 0;  // the adapter reads it locally; nothing remote
        case Use::control_receive: return IBV_ACCESS_LOCAL_WRITE;
        case Use::chunk_written:
        case Use::pin_all_written:
        case Use::postcopy_landing: return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        case Use::postcopy_read:
        case Use::pull_served: return IBV_ACCESS_REMOTE_READ;
        case Use::pull_landing: return IBV_ACCESS_LOCAL_WRITE;
    }
    return 0;
}

const char* advice_for(Use use) {
    switch (use) {
        case Use::pin_all_read:
        case Use::pin_all_written: return "raise the locked-memory limit (ulimit -l) or turn rdma-pin-all off";
        case Use::chunk_read:
        case Use::chunk_written:
        case Use::postcopy_read: return "raise the locked-memory limit (ulimit -l) or set rdma-pin-limit";
        case Use::control_send:
        case Use::control_receive:
        case Use::postcopy_staging:
        case Use::postcopy_landing:
        case Use::pull_landing: break;
        case Use::pull_served: return "raise the locked-memory limit (ulimit -l) of the serving vmm: it pins the whole save";
    }
    return "raise the locked-memory limit (ulimit -l)";
}

}  // namespace

Result<MemoryRegion> MemoryRegistry::register_memory(void* addr, size_t length, Use use, std::string_view what) const {
    MemoryRegion mr(ibv_reg_mr(pd_, addr, length, access_for(use)));
    if (!mr) return Error::from_errno(fmt::format("registering {} ({} bytes) for RDMA", what, length), errno, advice_for(use));
    return mr;
}

Result<std::vector<MemoryRegion>> MemoryRegistry::register_blocks(const std::vector<LocalBlock>& blocks, Use use,
                                                                  const std::atomic<bool>* stop) const {
    std::vector<MemoryRegion> mrs;
    for (const LocalBlock& b : blocks) {
        if (stop != nullptr && *stop) return Error("pinning stopped");
        auto mr = register_memory(b.host, b.size, use, fmt::format("RAM block '{}' whole (rdma-pin-all)", b.name));
        if (!mr) return mr.error();
        mrs.push_back(std::move(*mr));
    }
    return mrs;
}

}  // namespace rdma_migrate
