// LiveSettings: the settings that reach a migration under way (the settings table's `live`
// rows, migration/params.cc), read lock-free by the engine each time it needs one: the rate
// limiters before each send, the postcopy sender at each request. SharedSettings (params.h)
// publishes every change the monitors make here; nothing is pushed into a running migration.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace vmm::migration {

// One slot per live row (the row names it).
enum class Live : uint8_t {
    max_bandwidth,           // precopy's cap, bytes/s (0 = unlimited)
    max_postcopy_bandwidth,  // postcopy's background push, bytes/s
    postcopy_readahead,      // bytes past requests in order that go at once
    count_                   // not a slot: how many there are
};

class LiveSettings {
public:
    uint64_t get(Live s) const { return values_[index(s)].load(std::memory_order_relaxed); }
    void set(Live s, uint64_t v) { values_[index(s)].store(v, std::memory_order_relaxed); }
    // The value, read each time it is called (for a part that takes a function, RateLimiter).
    // This object must outlive it.
    std::function<uint64_t()> reader(Live s) const {
        return [this, s] { return get(s); };
    }

private:
    static constexpr size_t kSlots = static_cast<size_t>(Live::count_);
    static constexpr size_t index(Live s) { return static_cast<size_t>(s); }
    std::array<std::atomic<uint64_t>, kSlots> values_{};
};

}  // namespace vmm::migration
