#include "vmm/memory/dirty_bitmap.h"

#include <bit>

namespace vmm::memory {

DirtyBitmap::DirtyBitmap(uint64_t pages)
    : pages_(pages), words_((pages + 63) / 64), bits_(new std::atomic<uint64_t>[words_]) {
    clear();
}

void DirtyBitmap::set(uint64_t page) {
    if (page >= pages_) return;
    bits_[page / 64].fetch_or(uint64_t{1} << (page % 64), std::memory_order_relaxed);
}

void DirtyBitmap::set_range(uint64_t first_page, uint64_t count) {
    if (first_page >= pages_) return;
    uint64_t end = count > pages_ - first_page ? pages_ : first_page + count;
    for (uint64_t p = first_page; p < end;) {
        uint64_t n = std::min<uint64_t>(64 - p % 64, end - p);
        bits_[p / 64].fetch_or(word_mask(p, n), std::memory_order_relaxed);
        p += n;
    }
}

void set_run(std::vector<uint64_t>& words, uint64_t first, uint64_t count) {
    for (uint64_t p = first, end = first + count; p < end;) {
        uint64_t n = std::min<uint64_t>(64 - p % 64, end - p);
        words[p / 64] |= word_mask(p, n);
        p += n;
    }
}

bool DirtyBitmap::test(uint64_t page) const {
    if (page >= pages_) return false;
    return (bits_[page / 64].load(std::memory_order_relaxed) >> (page % 64)) & 1;
}

uint64_t DirtyBitmap::merge(const uint64_t* src) {
    uint64_t n = 0;
    for (size_t i = 0; i < words_; ++i) {
        if (src[i] == 0) continue;
        n += static_cast<uint64_t>(std::popcount(src[i]));
        bits_[i].fetch_or(src[i], std::memory_order_relaxed);
    }
    return n;
}

uint64_t DirtyBitmap::count() const {
    uint64_t n = 0;
    for (size_t i = 0; i < words_; ++i)
        n += static_cast<uint64_t>(std::popcount(bits_[i].load(std::memory_order_relaxed)));
    return n;
}

void DirtyBitmap::take(std::vector<uint64_t>& out) {
    out.resize(words_);
    for (size_t i = 0; i < words_; ++i) out[i] = bits_[i].exchange(0, std::memory_order_acq_rel);
}

void DirtyBitmap::clear() {
    for (size_t i = 0; i < words_; ++i) bits_[i].store(0, std::memory_order_relaxed);
}

uint64_t count_bits(const uint64_t* words, size_t n) {
    uint64_t c = 0;
    for (size_t i = 0; i < n; ++i) c += static_cast<uint64_t>(std::popcount(words[i]));
    return c;
}

PageRun next_run(const std::vector<uint64_t>& words, uint64_t from, uint64_t end, uint64_t max) {
    auto set = [&](uint64_t p) { return ((words[p / 64] >> (p % 64)) & 1) != 0; };
    uint64_t p = from;
    while (p < end) {
        uint64_t rest = words[p / 64] >> (p % 64);
        if (rest != 0) {
            p += static_cast<uint64_t>(std::countr_zero(rest));
            break;
        }
        p = (p / 64 + 1) * 64;
    }
    if (p >= end) return {};
    uint64_t q = p;
    while (q < end && q - p < max && set(q)) ++q;
    return {p, q - p};
}

}  // namespace vmm::memory
