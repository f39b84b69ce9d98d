#include "vmm/memory/dirty_rate.h"

#include <algorithm>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"

namespace vmm::memory {

DirtyRateSampler::DirtyRateSampler(DirtyTracker& tracker, const GuestMemory& memory, std::chrono::milliseconds period)
    : tracker_(tracker), memory_(memory), period_(period), last_(std::chrono::steady_clock::now()) {
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

namespace {
bool keeps_to_a_set(const DirtyRate::Window& w) {
    return w.distinct_pages > 0 && static_cast<double>(w.distinct_pages) < kKeepsToASet * static_cast<double>(w.written_pages);
}
void take(DirtyRate& r, const DirtyRate::Window& w, bool hot) {
    r.working_set_pages = w.distinct_pages;
    r.hot_set_pages = hot ? w.distinct_pages : 0;
    r.working_set_seconds = w.seconds;
}
}  // namespace

// Where the set stops growing with the window, that is the set: a slow stream over a bounded area
// grows until a window holds a whole pass (the window twice as long then holds the same pages,
// written twice). A window holding pages written once long ago (the guest's boot, a file it
// loaded) grows past the set again: the first flat step wins, not the longest window. With no
// flat step seen, the shortest window that kept to a set.
void choose_working_set(DirtyRate& r) {
    r.working_set_pages = r.hot_set_pages = 0;
    r.working_set_seconds = 0;
    if (r.windows.empty()) return;
    take(r, r.windows.front(), false);
    for (size_t i = 0; i + 1 < r.windows.size(); ++i) {
        const auto &w = r.windows[i], &longer = r.windows[i + 1];
        if (keeps_to_a_set(longer) &&
            static_cast<double>(longer.distinct_pages) <= kSetStopsGrowing * static_cast<double>(w.distinct_pages)) {
            return take(r, longer, true);
        }
    }
    for (const auto& w : r.windows) {
        if (keeps_to_a_set(w)) return take(r, w, true);
    }
}

void DirtyRateSampler::take_working_set() {
    const auto& blocks = memory_.blocks();
    for (size_t i = 0; i < blocks.size(); ++i) {
        blocks[i]->recent().take(scratch_);
        working_set_.add(i, scratch_.data(), scratch_.size());
    }
    working_set_.end_period();
}

void DirtyRateSampler::update_windows_locked() {
    rate_.windows.clear();
    const Snapshot& last = history_.back();
    for (uint32_t periods : kWorkingSetPeriods) {
        if (working_set_.periods_ended() < periods || history_.size() <= periods) break;
        const Snapshot& first = history_[history_.size() - 1 - periods];
        rate_.windows.push_back({std::chrono::duration<double>(last.at - first.at).count(), working_set_.distinct(periods),
                                 last.total_pages - first.total_pages});
    }
    choose_working_set(rate_);
}

Status DirtyRateSampler::sample(Sample kind) {
    auto n = tracker_.sync();
    if (!n) return n.error();
    bool count_as_period = kind == Sample::period;
    if (count_as_period) take_working_set();  // a period's pages, stamped outside the readers' lock
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
        if (history_.size() > kHistory) history_.pop_front();
        update_windows_locked();
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
