#include "vmm/memory/working_set.h"

#include <algorithm>
#include <bit>

namespace vmm::memory {

void WorkingSet::add(size_t block, const uint64_t* bits, size_t words) {
    if (stamps_.size() <= block) stamps_.resize(block + 1);
    auto& stamps = stamps_[block];
    if (stamps.size() < words * 64) stamps.resize(words * 64, 0);
    for (size_t w = 0; w < words; ++w) {
        for (uint64_t word = bits[w]; word != 0; word &= word - 1) {
            uint32_t& stamp = stamps[w * 64 + static_cast<size_t>(std::countr_zero(word))];
            if (stamp == period_) continue;
            // A page last dirtied in a period still counted moves from that period to this one.
            if (stamp != 0 && period_ - stamp <= kPeriods) --last_in(stamp);
            stamp = period_;
            ++last_in(period_);
        }
    }
}

void WorkingSet::end_period() {
    ++period_;
    last_in(period_) = 0;  // the slot of the period that just left the window
}

uint64_t WorkingSet::distinct(uint32_t periods) const {
    periods = std::min({periods, kPeriods, periods_ended()});
    uint64_t pages = 0;
    for (uint32_t p = period_ - periods; p < period_; ++p) pages += last_in_[p % last_in_.size()];
    return pages;
}

}  // namespace vmm::memory
