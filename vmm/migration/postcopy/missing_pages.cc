#include "vmm/migration/postcopy/missing_pages.h"

#include <algorithm>
#include <bit>

namespace vmm::migration {

MissingPages::MissingPages(std::vector<BlockInfo> blocks, std::vector<uint8_t*> hosts)
    : blocks_(std::move(blocks)), hosts_(std::move(hosts)) {
    for (const auto& b : blocks_) bits_.emplace_back((b.size / kStreamPageSize + 63) / 64, 0);
}

namespace {
// Calls fn(word, mask) for the words holding pages [first, first + count), a mask of those pages'
// bits in each: a whole block's range is a word at a time (a 16 GiB guest has 4 Mi pages).
template <typename Fn>
void for_words(uint64_t first, uint64_t count, Fn&& fn) {
    uint64_t p = first, end = first + count;
    while (p < end) {
        uint64_t bit = p % 64, n = std::min<uint64_t>(64 - bit, end - p);
        uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << bit;
        fn(p / 64, mask);
        p += n;
    }
}
}  // namespace

void MissingPages::add(uint32_t block, uint64_t first_page, uint64_t count) {
    std::lock_guard lock(mutex_);
    for_words(first_page, count, [&](uint64_t word, uint64_t mask) {
        uint64_t& w = bits_[block][word];
        auto added = static_cast<uint64_t>(std::popcount(mask & ~w));
        w |= mask;
        remaining_ += added;
        total_ += added;
    });
}

std::optional<PageRef> MissingPages::locate(uint64_t address) const {
    for (uint32_t i = 0; i < blocks_.size(); ++i) {
        auto start = reinterpret_cast<uint64_t>(hosts_[i]);
        if (address >= start && address - start < blocks_[i].size) return PageRef{i, (address - start) / kStreamPageSize};
    }
    return std::nullopt;
}

bool MissingPages::missing(PageRef p) const {
    std::lock_guard lock(mutex_);
    return test(p.block, p.page);
}

uint64_t MissingPages::placed(uint32_t block, uint64_t first_page, uint64_t count) {
    std::lock_guard lock(mutex_);
    uint64_t n = 0;
    for_words(first_page, count, [&](uint64_t word, uint64_t mask) {
        uint64_t& w = bits_[block][word];
        n += static_cast<uint64_t>(std::popcount(w & mask));
        w &= ~mask;
    });
    remaining_ -= n;
    return n;
}

std::vector<std::vector<uint64_t>> MissingPages::snapshot() const {
    std::lock_guard lock(mutex_);
    return bits_;
}

uint64_t MissingPages::remaining() const {
    std::lock_guard lock(mutex_);
    return remaining_;
}

}  // namespace vmm::migration
