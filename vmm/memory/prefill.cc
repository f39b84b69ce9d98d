#include "vmm/memory/prefill.h"

#include <fmt/format.h>

#include <cstring>

#include "vmm/common/random_fill.h"
#include "vmm/common/units.h"

namespace vmm::memory {

Status prefill_random(const GuestMemory& mem, uint64_t bytes, uint64_t seed) {
    if (bytes > mem.total_size()) {
        return Error(fmt::format("cannot prefill {} of a guest with {} of RAM", format_size(bytes), format_size(mem.total_size())));
    }
    uint64_t state = random_fill_state(seed);
    for (const auto& b : mem.blocks()) {
        if (bytes == 0) break;
        uint64_t n = std::min(bytes, b->size()) & ~(kPageSize - 1);
        fill_random({reinterpret_cast<uint64_t*>(b->host()), n / 8}, state);
        b->dirty().set_range(0, n >> kPageShift);
        b->add_dirtied(n >> kPageShift);
        bytes -= n;
    }
    return {};
}

}  // namespace vmm::memory
