#include "vmm/migration/postcopy/recovery.h"

#include <fmt/format.h>

#include <algorithm>

namespace vmm::migration {

std::vector<std::vector<uint8_t>> encode_received_pages(const std::vector<BlockInfo>& blocks,
                                                        const std::vector<std::vector<uint64_t>>& missing) {
    std::vector<std::vector<uint8_t>> out;
    std::vector<uint64_t> words;
    for (uint32_t b = 0; b < blocks.size(); ++b) {
        uint64_t pages = blocks[b].size / kStreamPageSize;
        for (uint64_t first = 0; first < pages; first += kMaxBitmapPages) {
            auto count = static_cast<uint32_t>(std::min<uint64_t>(kMaxBitmapPages, pages - first));
            words.assign((count + 63) / 64, 0);
            for (size_t w = 0; w < words.size(); ++w) {
                uint64_t lacks = missing[b][first / 64 + w];
                uint64_t valid = count - w * 64 >= 64 ? ~uint64_t{0} : (uint64_t{1} << (count - w * 64)) - 1;
                words[w] = ~lacks & valid;
            }
            out.push_back(encode_received_bitmap(b, first, count, words));
        }
    }
    return out;
}

ReceivedPages::ReceivedPages(const std::vector<BlockInfo>& blocks) : next_(blocks.size(), 0) {
    for (const auto& b : blocks) {
        pages_.push_back(b.size / kStreamPageSize);
        bits_.emplace_back((pages_.back() + 63) / 64, 0);
    }
}

Status ReceivedPages::add(const ReturnMessage& m, const std::vector<uint64_t>& words) {
    if (m.type != ReturnType::received_bitmap) {
        return Error("postcopy recovery: the destination sent another message before describing every page it holds");
    }
    if (m.block >= next_.size() || m.first_page != next_[m.block]) {
        return Error(fmt::format("postcopy recovery: the destination's bitmap for block {} starts at page {}, where page "
                                 "{} was due (each page must be described once, in order)",
                                 m.block, m.first_page, m.block < next_.size() ? next_[m.block] : 0));
    }
    // decode_return checked that the range lies in the block; the words must match its count.
    if (words.size() != (uint64_t{m.page_count} + 63) / 64) return Error("postcopy recovery: a bitmap's words do not match its count");
    std::copy(words.begin(), words.end(), bits_[m.block].begin() + static_cast<ptrdiff_t>(m.first_page / 64));
    next_[m.block] += m.page_count;
    return {};
}

bool ReceivedPages::complete() const {
    for (size_t b = 0; b < next_.size(); ++b)
        if (next_[b] != pages_[b]) return false;
    return true;
}

}  // namespace vmm::migration
