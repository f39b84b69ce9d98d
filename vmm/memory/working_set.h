// WorkingSet: the period in which each guest page was last dirtied, so that the distinct pages a
// guest dirtied over any of the last kPeriods periods is one sum. A guest rewriting a set of pages
// shows it as a window whose distinct pages stay under what it wrote there; one writing new pages
// all the time dirties as many distinct pages as it writes, however long the window. A slow
// stream over a bounded area (32 MiB rewritten every 10 s) shows only over a window longer than
// a pass, which is why there are several lengths (DirtyRateSampler picks among them).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace vmm::memory {

class WorkingSet {
public:
    static constexpr uint32_t kPeriods = 32;  // the longest window, in periods

    // The pages of block `block` dirtied in the period under way (a plain bitmap of `words`
    // words, as DirtyBitmap::take gives it). A block first seen here starts never dirtied.
    void add(size_t block, const uint64_t* bits, size_t words);
    // Ends the period under way.
    void end_period();
    // Distinct pages dirtied in the last `periods` ended periods (at most kPeriods, and at most
    // those ended so far).
    uint64_t distinct(uint32_t periods) const;
    uint32_t periods_ended() const { return period_ - 1; }

private:
    uint64_t& last_in(uint32_t period) { return last_in_[period % last_in_.size()]; }
    // Per block, per page: the period it was last dirtied in (from 1), 0 never.
    std::vector<std::vector<uint32_t>> stamps_;
    // How many pages were last dirtied in each of the last kPeriods ended periods and the one under way.
    std::array<uint64_t, kPeriods + 1> last_in_{};
    uint32_t period_ = 1;  // the one under way
};

}  // namespace vmm::memory
