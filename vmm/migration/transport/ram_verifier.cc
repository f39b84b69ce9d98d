#include "vmm/migration/transport/ram_verifier.h"

#include <fmt/format.h>

#include <iterator>

#include "vmm/memory/ram_block.h"

namespace vmm::migration {

void RamVerifier::settle_range(uint32_t block, uint64_t first, uint64_t end) {
    auto& owed = owed_[block];
    auto from = owed.lower_bound(first), to = owed.lower_bound(end);
    owed_pages_ -= static_cast<uint64_t>(std::distance(from, to));
    owed.erase(from, to);
}

std::vector<uint64_t> RamVerifier::check(uint32_t block, uint64_t offset, std::span<const uint8_t> landed,
                                         std::span<const uint64_t> sums) {
    checked_bytes_ += landed.size();
    uint64_t first = offset / memory::kPageSize;
    std::vector<uint64_t> bad;  // pages of this record that did not match (rare: usually none)
    for (size_t i = 0; i < sums.size() && (i + 1) * memory::kPageSize <= landed.size(); ++i) {
        if (summer_(landed.data() + i * memory::kPageSize) != sums[i]) bad.push_back(first + i);
    }
    if (bad.empty() && owed_pages_.load() == 0) return bad;
    std::lock_guard lock(mu_);
    settle_range(block, first, first + sums.size());
    mismatches_ += bad.size();
    owed_[block].insert(bad.begin(), bad.end());
    owed_pages_ += bad.size();
    return bad;
}

void RamVerifier::for_each_owed(const std::function<void(uint32_t, uint64_t)>& fn) const {
    if (owed_pages_.load() == 0) return;
    std::lock_guard lock(mu_);
    for (uint32_t b = 0; b < owed_.size(); ++b)
        for (uint64_t page : owed_[b]) fn(b, page);
}

void RamVerifier::replaced(uint32_t block, uint64_t offset, uint64_t length) {
    if (owed_pages_.load() == 0) return;
    std::lock_guard lock(mu_);
    settle_range(block, offset / memory::kPageSize, (offset + length) / memory::kPageSize);
}

Status RamVerifier::settle() const {
    std::lock_guard lock(mu_);
    for (size_t b = 0; b < owed_.size(); ++b) {
        if (owed_[b].empty()) continue;
        const char* why = summer_.keyed() ? "(MAC mismatch) and was never sent again: it was written by someone other "
                                            "than the authenticated source, or corrupted on the way"
                                          : "(XXH3 mismatch) and was never sent again: the data was corrupted on the way";
        return Error(fmt::format("RAM verification failed: RAM block '{}' offset {:#x} (+{:#x}) arrived different from "
                                 "what the source read {} ({} such page(s) in the block); the migration is refused "
                                 "and the source keeps running",
                                 blocks_[b].name, *owed_[b].begin() * memory::kPageSize, memory::kPageSize, why,
                                 owed_[b].size()));
    }
    return {};
}

}  // namespace vmm::migration
