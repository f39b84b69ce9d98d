#include "vmm/migration/postcopy/readahead.h"

#include <algorithm>

namespace vmm::migration {

uint64_t ReadaheadWindow::on_request(uint32_t block, uint64_t first, uint64_t count) {
    bool in_order = any_ && block == block_ && first > first_ && first < reach_;
    window_ = in_order ? std::min(max_, std::max(kFirstWindow, window_ * 2)) : 0;
    any_ = true;
    block_ = block;
    first_ = first;
    // In order: the next fault past what this request and its burst bring, by up to as much
    // again (the push goes on at its pace meanwhile), or by a first window when there is none.
    uint64_t slack = std::max(kFirstWindow * 4, window_);
    reach_ = first + count + window_ + slack;
    return window_;
}

void ReadaheadWindow::set_max(uint64_t max_pages) {
    max_ = max_pages;
    window_ = std::min(window_, max_);
}

}  // namespace vmm::migration
