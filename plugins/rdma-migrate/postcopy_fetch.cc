// The destination's fault thread awaiting its own READ (PostcopyDestination::fetch).
//
// A fault's READ completes on the send CQ. Left to the receiving thread, the completion must
// first wake it (a CQ event), and that wake-up costs more than the READ itself: microseconds on
// an adapter where a READ takes two or three, a scheduler tick under the nested VM's TCG where it
// takes 0.2 ms. The fault thread is awake already, so it polls for the READ it posted, as
// perftest's ib_read_lat does, for about what READs have been taking, and hands the page back
// checked for vmm to place on that same thread. The receiving thread leaves that one completion
// alone meanwhile (fetching_); a READ that outlasts the wait goes to it as before.
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "postcopy_channel.h"
#include "trace.h"

namespace rdma_migrate {

// Under cq_mutex_: four times what READs have been taking (their completion times spread), at
// most x-rdma-postcopy-read-wait (1 ms unless set), and that long before any READ has completed.
std::chrono::microseconds PostcopyDestination::fetch_budget() const {
    if (read_us_ == 0) return fetch_wait_;
    return std::min(fetch_wait_, std::chrono::microseconds(static_cast<int64_t>(4 * read_us_) + 1));
}

Result<std::optional<PostcopyDestination::Arrival>> PostcopyDestination::fetch(uint32_t block, uint64_t offset) {
    using Clock = std::chrono::steady_clock;
    if (fetch_wait_.count() == 0) {  // the receiving thread places every page read
        if (auto s = request(block, offset); !s) return s.error();
        return std::optional<Arrival>{};
    }
    auto slot = ask(block, offset, true);
    if (!slot) {
        std::lock_guard lock(cq_mutex_);
        fetching_.reset();  // a READ that failed to post claims nothing
        return slot.error();
    }
    if (!*slot) return std::optional<Arrival>{};  // asked for, or a READ under way brings it
    Clock::time_point until{};
    std::optional<Error> failed;
    bool here = false;
    for (bool waiting = true; waiting;) {
        std::lock_guard lock(cq_mutex_);
        auto now = Clock::now();
        if (until == Clock::time_point{}) until = now + fetch_budget();
        auto polled = poll_sends();
        auto it = std::find(read_done_.begin(), read_done_.end(), **slot);
        here = polled && it != read_done_.end();
        if (here) read_done_.erase(it);
        waiting = polled && !here && now < until;
        if (!waiting) fetching_.reset();
        if (here) fetch_waits_.add(std::chrono::duration<double, std::micro>(Clock::now() - read_posted_at_[**slot]).count());
        if (!polled) failed = polled.error();
    }
    if (failed) return failed_fetch(*failed);
    if (!here) {
        ++fetched_late_;
        trace("destination: READ into slot {} outlasted the fault thread's wait: the receiving thread takes it", **slot);
        return std::optional<Arrival>{};
    }
    auto a = read_arrival(**slot, fetch_tags_ ? &*fetch_tags_ : nullptr);
    if (!a) return failed_fetch(a.error());
    return std::optional<Arrival>{std::move(*a)};
}

// A fetch that failed fails the receiving thread's next() too, with the same reason: it is
// woken to it, since nothing on its CQs may ever come (a page that fails its tag was read whole).
Error PostcopyDestination::failed_fetch(Error why) {
    {
        std::lock_guard lock(cq_mutex_);
        if (!cq_failure_) cq_failure_ = why;
    }
    uint64_t one = 1;
    (void)::write(wake_.get(), &one, sizeof one);
    return why;
}

}  // namespace rdma_migrate
