#include "vmmd/migration/pin_limit.h"

#include <fmt/format.h>

#include "vmm/common/units.h"

namespace vmmd {

namespace {
constexpr uint64_t kOneChunk = 1ull << 20;  // vmm's default x-rdma-chunk-size
}

vmm::Result<std::optional<uint64_t>> dynamic_pin_limit(uint64_t ram, uint64_t hard_limit) {
    if (hard_limit >= ram + kRdmaPinHeadroom) return std::optional<uint64_t>();
    if (hard_limit < kRdmaPinHeadroom + kOneChunk) {
        return vmm::Error(fmt::format("<hard_limit> {} leaves no room to register RAM for RDMA (the transport itself locks {}): raise it",
                                      vmm::format_size(hard_limit), vmm::format_size(kRdmaPinHeadroom)));
    }
    return std::optional<uint64_t>(hard_limit - kRdmaPinHeadroom);
}

}  // namespace vmmd
