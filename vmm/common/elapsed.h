// Elapsed time in the units the migration statistics use (steady clock).
#pragma once

#include <chrono>
#include <cstdint>

namespace vmm {

using SteadyClock = std::chrono::steady_clock;

inline uint64_t ms_since(SteadyClock::time_point t) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count());
}

inline double ms_between(SteadyClock::time_point a, SteadyClock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace vmm
