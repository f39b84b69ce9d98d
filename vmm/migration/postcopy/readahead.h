// ReadaheadWindow: how far the postcopy push may run ahead of its pace right after a request.
// A guest that faults its way through memory in order (a scan, a copy, a stress pass) faults
// again a few pages further on as soon as it has its page; each such fault costs it a round
// trip. When requests follow each other in order within reach, the window doubles (from 16
// pages up to the maximum); a request anywhere else closes it. The pages it lets through are
// pages that must go anyway, each still once: the push accounts them to max-postcopy-bandwidth
// and waits that much longer afterwards (at most a second: like a request, what the guest is
// about to touch is not held back by the cap).
// Pure: the sender feeds it requests and gets the burst back.
#pragma once

#include <cstdint>

namespace vmm::migration {

class ReadaheadWindow {
public:
    static constexpr uint64_t kFirstWindow = 16;  // pages: one background record
    explicit ReadaheadWindow(uint64_t max_pages) : max_(max_pages) {}
    // A request for [first, first + count) of `block`: the pages the push may send past it at
    // once, ahead of its pace (0: none).
    uint64_t on_request(uint32_t block, uint64_t first, uint64_t count);
    // A new maximum (x-postcopy-readahead changed): a window already wider shrinks to it.
    void set_max(uint64_t max_pages);

private:
    uint64_t max_;
    uint64_t window_ = 0;
    bool any_ = false;
    uint32_t block_ = 0;
    uint64_t first_ = 0;  // the last request's first page
    uint64_t reach_ = 0;  // pages before this (and after first_) count as in order
};

}  // namespace vmm::migration
