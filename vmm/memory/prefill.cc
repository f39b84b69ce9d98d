#include "vmm/memory/prefill.h"

#include <fmt/format.h>

#include <cstring>

#include "vmm/common/units.h"

namespace vmm::memory {

Status prefill_random(const GuestMemory& mem, uint64_t bytes, uint64_t seed) {
    if (bytes > mem.total_size()) {
        return Error(fmt::format("cannot prefill {} of a guest with {} of RAM", format_size(bytes), format_size(mem.total_size())));
    }
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (const auto& b : mem.blocks()) {
        if (bytes == 0) break;
        uint64_t n = std::min(bytes, b->size()) & ~(kPageSize - 1);
        auto* p = reinterpret_cast<uint64_t*>(b->host());
        for (uint64_t i = 0; i < n / 8; ++i) {  // xorshift64*: cheap, incompressible enough
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            p[i] = x * 0x2545f4914f6cdd1dull;
        }
        b->dirty().set_range(0, n >> kPageShift);
        b->add_dirtied(n >> kPageShift);
        bytes -= n;
    }
    return {};
}

}  // namespace vmm::memory
