#include "vmm/migration/precopy/resume.h"

#include <fmt/format.h>

#include <algorithm>

namespace vmm::migration {

ArrivalRounds::ArrivalRounds(const std::vector<BlockInfo>& blocks) {
    for (const auto& b : blocks) rounds_.emplace_back(b.size / kStreamPageSize, kNeverArrived);
}

void ArrivalRounds::landed(uint32_t block, uint64_t first_page, uint64_t count, uint32_t round) {
    std::lock_guard lock(mu_);
    if (block >= rounds_.size()) return;
    auto& r = rounds_[block];
    uint64_t end = std::min<uint64_t>(r.size(), first_page + count);
    for (uint64_t p = first_page; p < end; ++p)
        if (r[p] == kNeverArrived || r[p] < round) r[p] = round;
}

void ArrivalRounds::unarrived(uint32_t block, uint64_t page) {
    std::lock_guard lock(mu_);
    if (block < rounds_.size() && page < rounds_[block].size()) rounds_[block][page] = kNeverArrived;
}

std::vector<std::vector<uint8_t>> ArrivalRounds::encode() const {
    std::lock_guard lock(mu_);
    std::vector<std::vector<uint8_t>> out;
    for (uint32_t b = 0; b < rounds_.size(); ++b) {
        const auto& r = rounds_[b];
        for (uint64_t first = 0; first < r.size(); first += kMaxRoundsPages) {
            uint64_t n = std::min<uint64_t>(kMaxRoundsPages, r.size() - first);
            out.push_back(encode_received_rounds(b, first, std::span<const uint32_t>(r.data() + first, n)));
        }
    }
    return out;
}

SentRounds::SentRounds(const std::vector<uint64_t>& pages_per_block) {
    for (uint64_t pages : pages_per_block) rounds_.emplace_back(pages, 0);
}

void SentRounds::taken(uint32_t round, const std::vector<std::vector<uint64_t>>& bitmaps) {
    last_ = std::max(last_, round);
    for (size_t b = 0; b < bitmaps.size() && b < rounds_.size(); ++b) {
        auto& r = rounds_[b];
        for (size_t w = 0; w < bitmaps[b].size(); ++w) {
            for (uint64_t bits = bitmaps[b][w]; bits != 0; bits &= bits - 1) {
                uint64_t p = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
                if (p < r.size()) r[p] = round;
            }
        }
    }
}

ReportedRounds::ReportedRounds(const std::vector<uint64_t>& pages_per_block, uint32_t last_round)
    : next_(pages_per_block.size(), 0), last_(last_round) {
    for (uint64_t pages : pages_per_block) rounds_.emplace_back(pages, kNeverArrived);
}

Status ReportedRounds::add(const ReturnMessage& m, std::span<const uint32_t> rounds) {
    if (m.type != ReturnType::received_rounds) {
        return Error("precopy resume: the destination sent another message before describing every page it holds");
    }
    if (m.block >= next_.size() || m.first_page != next_[m.block]) {
        return Error(fmt::format("precopy resume: the destination's rounds for block {} start at page {}, where page {} "
                                 "was due (each page must be described once, in order)",
                                 m.block, m.first_page, m.block < next_.size() ? next_[m.block] : 0));
    }
    auto& out = rounds_[m.block];
    if (rounds.size() != m.page_count || m.first_page + rounds.size() > out.size()) {
        return Error("precopy resume: the destination's rounds do not match their count");
    }
    for (size_t i = 0; i < rounds.size(); ++i) {
        if (rounds[i] != kNeverArrived && rounds[i] > last_) {
            return Error(fmt::format("precopy resume: the destination says page {} of block {} arrived in round {}, and "
                                     "this source has begun rounds 0 to {} only: it is not this migration's destination, "
                                     "or it lies",
                                     m.first_page + i, m.block, rounds[i], last_));
        }
        out[m.first_page + i] = rounds[i];
    }
    next_[m.block] += m.page_count;
    return {};
}

uint64_t ReportedRounds::also_arrived(const ArrivalRounds& delivered) {
    uint64_t moved = 0;
    for (size_t b = 0; b < rounds_.size() && b < delivered.rounds().size(); ++b) {
        const auto& d = delivered.rounds()[b];
        auto& r = rounds_[b];
        for (size_t p = 0; p < r.size() && p < d.size(); ++p) {
            if (d[p] == kNeverArrived || (r[p] != kNeverArrived && r[p] >= d[p])) continue;
            r[p] = d[p];
            ++moved;
        }
    }
    return moved;
}

uint64_t ReportedRounds::held() const {
    uint64_t n = 0;
    for (const auto& r : rounds_) n += static_cast<uint64_t>(std::count_if(r.begin(), r.end(), [](uint32_t x) { return x != kNeverArrived; }));
    return n;
}

bool ReportedRounds::complete() const {
    for (size_t b = 0; b < next_.size(); ++b)
        if (next_[b] != rounds_[b].size()) return false;
    return true;
}

}  // namespace vmm::migration
