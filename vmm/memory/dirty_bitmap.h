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

// The mask of bits [first % 64, first % 64 + n) of one word (n <= 64 - first % 64).
inline uint64_t word_mask(uint64_t first, uint64_t n) {
    return (n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1)) << (first % 64);
}
// Sets bits [first, first + count) of a plain bitmap (long enough), a word at a time.
void set_run(std::vector<uint64_t>& words, uint64_t first, uint64_t count);

// A run of set bits (pages) in a plain bitmap; count 0: none.
struct PageRun {
    uint64_t first = 0, count = 0;
};
// The first run of set bits at or after `from` and before `end` (end <= words.size() * 64), cut
// at `max` bits; whole zero words are skipped at once.
PageRun next_run(const std::vector<uint64_t>& words, uint64_t from, uint64_t end, uint64_t max = UINT64_MAX);

}  // namespace vmm::memory
