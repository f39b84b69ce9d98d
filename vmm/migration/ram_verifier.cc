#include "vmm/migration/ram_verifier.h"

#include <fmt/format.h>
#include <xxhash.h>

#include "vmm/memory/ram_block.h"

namespace vmm::migration {

uint64_t page_checksum(const uint8_t* page) { return XXH3_64bits(page, memory::kPageSize); }

void append_page_sums(std::vector<uint8_t>& out, std::span<const uint8_t> data) {
    size_t at = out.size();
    out.resize(at + data.size() / memory::kPageSize * sizeof(uint64_t));
    for (size_t p = 0; p < data.size(); p += memory::kPageSize, at += sizeof(uint64_t)) {
        uint64_t sum = page_checksum(data.data() + p);
        for (size_t i = 0; i < sizeof(uint64_t); ++i) out[at + i] = static_cast<uint8_t>(sum >> (8 * i));
    }
}

Status read_page_sums(ByteStream& in, uint64_t length, std::vector<uint64_t>& sums) {
    if (length > kMaxPagesRecord || length % memory::kPageSize != 0) {
        return Error("migration stream: PAGES_SUMMED of a length that is not whole pages of one record");
    }
    std::vector<uint8_t> bytes(length / memory::kPageSize * sizeof(uint64_t));
    if (auto s = in.read_exact(bytes); !s) return s;
    sums.resize(bytes.size() / sizeof(uint64_t));
    for (size_t i = 0; i < sums.size(); ++i) {
        uint64_t v = 0;
        for (size_t b = 0; b < sizeof(uint64_t); ++b) v |= static_cast<uint64_t>(bytes[i * 8 + b]) << (8 * b);
        sums[i] = v;
    }
    return {};
}

void RamVerifier::settle_range(uint32_t block, uint64_t first, uint64_t end) {
    auto& owed = owed_[block];
    auto it = owed.upper_bound(first);
    if (it != owed.begin()) --it;  // the range starting at or before `first` may reach into it
    while (it != owed.end() && it->first < end) {
        auto [a, b] = *it;
        if (b <= first) {
            ++it;
            continue;
        }
        it = owed.erase(it);
        --owed_ranges_;
        if (a < first) {
            owed.emplace(a, first);
            ++owed_ranges_;
        }
        if (b > end) {
            owed.emplace(end, b);
            ++owed_ranges_;
        }
    }
}

void RamVerifier::check(uint32_t block, uint64_t offset, std::span<const uint8_t> landed, std::span<const uint64_t> sums) {
    checked_bytes_ += landed.size();
    uint64_t first = offset / memory::kPageSize;
    std::vector<uint64_t> bad;  // pages of this record that did not match (rare: usually none)
    for (size_t i = 0; i < sums.size() && (i + 1) * memory::kPageSize <= landed.size(); ++i) {
        if (page_checksum(landed.data() + i * memory::kPageSize) != sums[i]) bad.push_back(first + i);
    }
    if (bad.empty() && owed_ranges_.load() == 0) return;
    std::lock_guard lock(mu_);
    settle_range(block, first, first + sums.size());
    mismatches_ += bad.size();
    for (uint64_t page : bad) {
        owed_[block].emplace(page, page + 1);
        ++owed_ranges_;
    }
}

void RamVerifier::replaced(uint32_t block, uint64_t offset, uint64_t length) {
    if (owed_ranges_.load() == 0) return;
    std::lock_guard lock(mu_);
    settle_range(block, offset / memory::kPageSize, (offset + length) / memory::kPageSize);
}

Status RamVerifier::settle() const {
    std::lock_guard lock(mu_);
    for (size_t b = 0; b < owed_.size(); ++b) {
        if (owed_[b].empty()) continue;
        auto [first, end] = *owed_[b].begin();
        return Error(fmt::format("RAM verification failed: RAM block '{}' offset {:#x} (+{:#x}) arrived different from "
                                 "what the source read (XXH3 mismatch) and was never sent again: the data was "
                                 "corrupted on the way; the migration is refused and the source keeps running",
                                 blocks_[b].name, first * memory::kPageSize, (end - first) * memory::kPageSize));
    }
    return {};
}

}  // namespace vmm::migration
