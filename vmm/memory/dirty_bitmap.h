// DirtyBitmap: one bit per 4 KiB guest page, set concurrently (KVM harvests, the VMM's own
// writes) and taken atomically (word by word exchange) by whoever consumes dirty pages.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace vmm::memory {

constexpr uint64_t kPageSize = 4096;
constexpr unsigned kPageShift = 12;

class DirtyBitmap {
public:
    explicit DirtyBitmap(uint64_t pages);

    uint64_t pages() const { return pages_; }
    size_t words() const { return words_; }

    void set(uint64_t page);
    void set_range(uint64_t first_page, uint64_t count);
    bool test(uint64_t page) const;
    // OR `src` (words() words, as KVM's dirty log lays them out) in; returns how many bits were
    // set in `src`.
    uint64_t merge(const uint64_t* src);
    uint64_t count() const;
    // Moves every set bit into `out` (resized to words()) and clears this bitmap.
    void take(std::vector<uint64_t>& out);
    void clear();

private:
    uint64_t pages_;
    size_t words_;
    std::unique_ptr<std::atomic<uint64_t>[]> bits_;
};

// Number of set bits in a plain bitmap of `words` words.
uint64_t count_bits(const uint64_t* words, size_t n);

}  // namespace vmm::memory
