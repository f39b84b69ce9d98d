#include "proto/pull_plan.h"

#include <algorithm>

namespace rdma_migrate {

std::vector<PullPiece> pull_pieces(std::span<const uint8_t> resident, uint32_t most) {
    std::vector<PullPiece> out;
    if (most == 0) return out;
    for (uint64_t p = 0; p < resident.size();) {
        if ((resident[p] & 1) != 0) {
            ++p;
            continue;
        }
        uint64_t first = p;
        while (p < resident.size() && (resident[p] & 1) == 0 && p - first < most) ++p;
        out.push_back({first, static_cast<uint32_t>(p - first)});
    }
    return out;
}

namespace {
std::chrono::nanoseconds time_for(uint64_t bytes, uint64_t rate) {
    return std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / static_cast<double>(rate)));
}
}  // namespace

PullPace::Clock::time_point PullPace::when(uint64_t bytes, Clock::time_point now) const {
    if (rate_ == 0) return now;
    // A READ needs min(bytes, burst_) in the bucket (a larger one, a full bucket; the debt it
    // leaves is waited out by the next).
    return empty_at_ + time_for(std::min(bytes, burst_), rate_);
}

void PullPace::took(uint64_t bytes, Clock::time_point now) {
    if (rate_ == 0) return;
    // What the bucket held at `now` (at most burst_), less `bytes`: empty_at_ moves that far on.
    Clock::time_point floor = now - time_for(burst_, rate_);
    empty_at_ = std::max(empty_at_, floor) + time_for(bytes, rate_);
}

}  // namespace rdma_migrate
