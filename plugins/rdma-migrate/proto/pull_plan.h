// kCapPostcopyReadPush: the destination's own background push. The source names the runs its
// push holds back (PULL), and the destination reads them by RDMA READ, in pieces of at most a
// slot's pages, at the pace the PULL says (the source's max-postcopy-bandwidth), leaving out
// what it has placed meanwhile. Pure: what it lacks comes from mincore's answer on its own
// guest RAM (a page dropped at the switch is not resident until placed), and the pace from a
// clock the caller passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

namespace rdma_migrate {

// A run of pages to read: `first` page of the region, `pages` long.
struct PullPiece {
    uint64_t first = 0;
    uint32_t pages = 0;
    bool operator==(const PullPiece&) const = default;
};

// The pieces of a run whose pages are not resident here (`resident`: mincore's vector over
// the run, bit 0 of each byte), each cut into pieces of at most `most` pages.
std::vector<PullPiece> pull_pieces(std::span<const uint8_t> resident, uint32_t most);

// Bytes a second (0: no limit), in a bucket that holds `burst` of them: a READ may be posted
// once the bucket has its bytes; a READ larger than the bucket waits for a full one.
class PullPace {
public:
    using Clock = std::chrono::steady_clock;
    explicit PullPace(uint64_t rate = 0, uint64_t burst = 256 * 1024) : rate_(rate), burst_(burst) {}
    void set_rate(uint64_t rate) { rate_ = rate; }
    uint64_t rate() const { return rate_; }
    // When `bytes` may go (now or earlier: at once).
    Clock::time_point when(uint64_t bytes, Clock::time_point now) const;
    // `bytes` went at `now`.
    void took(uint64_t bytes, Clock::time_point now);

private:
    uint64_t rate_;
    uint64_t burst_;
    // The moment the bucket was last empty and then filled at rate_ until now: the bucket holds
    // (now - empty_at_) * rate_ bytes, at most burst_.
    Clock::time_point empty_at_{};
};

}  // namespace rdma_migrate
