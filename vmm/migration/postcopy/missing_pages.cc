#include "vmm/migration/postcopy/missing_pages.h"

namespace vmm::migration {

MissingPages::MissingPages(std::vector<BlockInfo> blocks, std::vector<uint8_t*> hosts)
    : blocks_(std::move(blocks)), hosts_(std::move(hosts)) {
    for (const auto& b : blocks_) bits_.emplace_back((b.size / kStreamPageSize + 63) / 64, 0);
}

void MissingPages::add(uint32_t block, uint64_t first_page, uint64_t count) {
    std::lock_guard lock(mutex_);
    for (uint64_t p = first_page; p < first_page + count; ++p) {
        uint64_t& w = bits_[block][p / 64];
        uint64_t bit = uint64_t{1} << (p % 64);
        if ((w & bit) != 0) continue;
        w |= bit;
        ++remaining_;
        ++total_;
    }
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
    for (uint64_t p = first_page; p < first_page + count; ++p) {
        uint64_t& w = bits_[block][p / 64];
        uint64_t bit = uint64_t{1} << (p % 64);
        if ((w & bit) == 0) continue;
        w &= ~bit;
        ++n;
    }
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
