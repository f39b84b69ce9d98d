// Guest memory for the migration tests that run without KVM: two RAM blocks and their layout
// as the stream describes it.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "vmm/memory/guest_memory.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration::test {

constexpr uint64_t M = 1 << 20;

// "pc.ram" (8 MiB at 0) and "high" (4 MiB at 16 MiB), without huge pages.
inline memory::GuestMemory make_memory() {
    auto m = memory::GuestMemory::create({{"pc.ram", 0, 8 * M, memory::HugePages::none},
                                          {"high", 16 * M, 4 * M, memory::HugePages::none}});
    EXPECT_TRUE(m);
    return std::move(*m);
}

inline std::vector<BlockInfo> layout(const memory::GuestMemory& m) {
    std::vector<BlockInfo> out;
    for (const auto& b : m.blocks()) out.push_back({b->name(), b->guest_addr(), b->size()});
    return out;
}

}  // namespace vmm::migration::test
