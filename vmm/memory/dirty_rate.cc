#include "vmm/memory/dirty_rate.h"

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::memory {

DirtyRateSampler::DirtyRateSampler(DirtyTracker& tracker, std::chrono::milliseconds period)
    : tracker_(tracker), period_(period), last_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this] { loop(); });
}

DirtyRateSampler::~DirtyRateSampler() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

Status DirtyRateSampler::sync_now() { return sample(false); }

DirtyRate DirtyRateSampler::rate() const {
    std::lock_guard lock(mutex_);
    return rate_;
}

Status DirtyRateSampler::sample(bool count_as_period) {
    auto n = tracker_.sync();
    if (!n) return n.error();
    std::lock_guard lock(mutex_);
    rate_.total_pages += *n;
    pages_since_sample_ += *n;
    if (count_as_period) {
        auto now = std::chrono::steady_clock::now();
        double secs = std::chrono::duration<double>(now - last_).count();
        last_ = now;
        rate_.pages_in_last_period = pages_since_sample_;
        rate_.pages_per_second = secs > 0 ? static_cast<double>(pages_since_sample_) / secs : 0;
        rate_.period_seconds = secs;
        ++rate_.samples;
        pages_since_sample_ = 0;
    }
    return {};
}

void DirtyRateSampler::loop() {
    name_this_thread("dirty-rate");
    std::unique_lock lock(mutex_);
    bool reported = false;
    while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
        lock.unlock();
        auto s = sample(true);
        if (!s && !reported) {
            log::warn("dirty-page sampling stopped: {}", s.error().message());
            reported = true;
        }
        lock.lock();
        if (reported) break;
    }
}

}  // namespace vmm::memory
