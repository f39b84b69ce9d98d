#include "vmm/memory/dirty_rate.h"

#include <algorithm>
#include <optional>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::memory {

DirtyRateSampler::DirtyRateSampler(DirtyTracker& tracker, const GuestMemory& memory, std::chrono::milliseconds period)
    : tracker_(tracker), memory_(memory), period_(period), last_(std::chrono::steady_clock::now()), working_set_since_(last_) {
    history_.push_back(snapshot_locked(last_));
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

Status DirtyRateSampler::sync_now() { return sample(Sample::any); }

DirtyRate DirtyRateSampler::rate() const {
    std::lock_guard lock(mutex_);
    return rate_;
}

DirtyWindow DirtyRateSampler::window(std::chrono::milliseconds want) const {
    std::lock_guard lock(mutex_);
    DirtyWindow w;
    if (history_.size() < 2) return w;
    const Snapshot& last = history_.back();
    auto first = history_.begin();  // the newest that is at least `want` older, or the oldest kept
    for (auto it = history_.begin(); it != history_.end() && last.at - it->at >= want; ++it) first = it;
    w.seconds = std::chrono::duration<double>(last.at - first->at).count();
    w.pages = last.total_pages - first->total_pages;
    w.fast_pages = last.fast_pages - first->fast_pages;
    w.fast_seconds = last.fast_seconds - first->fast_seconds;
    auto diff = [](const std::vector<uint64_t>& now, const std::vector<uint64_t>& then) {
        std::vector<uint64_t> out;
        for (size_t i = 0; i < now.size(); ++i) out.push_back(now[i] - (i < then.size() ? then[i] : 0));
        return out;
    };
    w.block_pages = diff(last.block_pages, first->block_pages);
    w.vcpu_pages = diff(last.vcpu_pages, first->vcpu_pages);
    return w;
}

DirtyRateSampler::Snapshot DirtyRateSampler::snapshot_locked(std::chrono::steady_clock::time_point now) const {
    Snapshot s{now, rate_.total_pages, fast_pages_, fast_seconds_, {}, tracker_.dirtied_by_vcpu()};
    for (const auto& b : memory_.blocks()) s.block_pages.push_back(b->dirtied());
    return s;
}

uint64_t DirtyRateSampler::take_working_set() {
    uint64_t pages = 0;
    for (const auto& b : memory_.blocks()) {
        b->recent().take(scratch_);
        pages += count_bits(scratch_.data(), scratch_.size());
    }
    return pages;
}

Status DirtyRateSampler::sample(Sample kind) {
    auto n = tracker_.sync();
    if (!n) return n.error();
    bool count_as_period = kind == Sample::period;
    std::optional<uint64_t> working_set;
    if (count_as_period && ++periods_ % kWorkingSetPeriods == 0) working_set = take_working_set();  // the window's end
    std::lock_guard lock(mutex_);
    rate_.total_pages += *n;
    pages_since_sample_ += *n;
    if (kind == Sample::fast) {  // what the period's first moments dirtied, whoever synced meanwhile
        fast_pages_ += pages_since_sample_;
        fast_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
    }
    if (count_as_period) {
        auto now = std::chrono::steady_clock::now();
        history_.push_back(snapshot_locked(now));
        if (working_set) {
            rate_.working_set_pages = *working_set;
            rate_.working_set_seconds = std::chrono::duration<double>(now - working_set_since_).count();
            working_set_since_ = now;
        }
        if (history_.size() > kHistory) history_.pop_front();
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
    // Each period: its sample at its end, and one a tenth of it in (100 ms at most): how fast
    // the guest dirties over a short round, where a hot set rewritten within the period shows.
    auto fast = std::clamp(period_ / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
    std::unique_lock lock(mutex_);
    bool at_fast = true;
    for (;;) {
        if (cv_.wait_for(lock, at_fast ? fast : period_ - fast, [this] { return stop_; })) break;
        lock.unlock();
        auto s = sample(at_fast ? Sample::fast : Sample::period);
        at_fast = !at_fast;
        lock.lock();
        if (!s) {
            log::warn("dirty-page sampling stopped: {}", s.error().message());
            break;
        }
    }
}

}  // namespace vmm::memory
