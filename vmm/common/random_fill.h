// Incompressible filler for benchmarks: xorshift64*, cheap and with no zero pages in practice.
// One generator for the VMM's host-side prefill and the raw TCP ceiling's send buffer.
#pragma once

#include <cstdint>
#include <span>

namespace vmm {

// The generator's state for `seed` (never zero, as xorshift needs).
inline uint64_t random_fill_state(uint64_t seed) { return seed * 0x9e3779b97f4a7c15ull + 1; }

// Fills `words`, advancing `state`, so that consecutive calls continue one sequence.
inline void fill_random(std::span<uint64_t> words, uint64_t& state) {
    uint64_t x = state;
    for (auto& w : words) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        w = x * 0x2545f4914f6cdd1dull;
    }
    state = x;
}

}  // namespace vmm
