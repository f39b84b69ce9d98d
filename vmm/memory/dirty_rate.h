// DirtyRateSampler: syncs the dirty tracker on a fixed period and keeps the rate at which the
// guest dirties pages, so `info ramblocks` and `info dirty-rate` show live numbers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "vmm/memory/dirty_tracker.h"

namespace vmm::memory {

struct DirtyRate {
    double pages_per_second = 0;
    uint64_t pages_in_last_period = 0;
    uint64_t total_pages = 0;  // harvested since start
    uint64_t samples = 0;
    double period_seconds = 0;
    // Distinct pages dirtied over the last whole working-set window (kWorkingSetPeriods periods):
    // under the pages a period times the periods when the guest keeps rewriting a hot set.
    uint64_t working_set_pages = 0;
    double working_set_seconds = 0;  // 0: no window has ended yet
};

// What the guest dirtied over the last few periods (window()): in all, in each RAM block, and by
// each vCPU where the tracker knows who wrote (the dirty ring; empty under the dirty log).
struct DirtyWindow {
    double seconds = 0;  // 0: fewer than two samples yet
    uint64_t pages = 0;
    std::vector<uint64_t> block_pages;  // in GuestMemory::blocks() order
    std::vector<uint64_t> vcpu_pages;   // in vCPU order
    // Of them, what the first tenth of each period dirtied (100 ms at most), over its time: a
    // guest rewriting a hot set several times a period dirties faster there than a period shows.
    uint64_t fast_pages = 0;
    double fast_seconds = 0;
    double pages_per_second() const { return seconds > 0 ? static_cast<double>(pages) / seconds : 0; }
    double fast_pages_per_second() const { return fast_seconds > 0 ? static_cast<double>(fast_pages) / fast_seconds : 0; }
};

class DirtyRateSampler {
public:
    DirtyRateSampler(DirtyTracker& tracker, const GuestMemory& memory, std::chrono::milliseconds period);
    ~DirtyRateSampler();
    DirtyRateSampler(const DirtyRateSampler&) = delete;
    DirtyRateSampler& operator=(const DirtyRateSampler&) = delete;

    // Syncs now (e.g. before showing counts); returns the tracker's error, if any.
    Status sync_now();
    DirtyRate rate() const;
    // The periods of the last `want` (at least; all it keeps when it has less: up to kHistory).
    DirtyWindow window(std::chrono::milliseconds want) const;

    static constexpr size_t kHistory = 32;
    static constexpr uint64_t kWorkingSetPeriods = 4;

private:
    struct Snapshot {
        std::chrono::steady_clock::time_point at;
        uint64_t total_pages;               // harvested since start
        uint64_t fast_pages;                // fast_pages_, fast_seconds_ then
        double fast_seconds;
        std::vector<uint64_t> block_pages;  // each block's dirtied(), since start
        std::vector<uint64_t> vcpu_pages;   // the tracker's dirtied_by_vcpu()
    };
    enum class Sample { any, period, fast };  // sync_now's; a period's end; a tenth of it in
    void loop();
    Status sample(Sample kind);
    Snapshot snapshot_locked(std::chrono::steady_clock::time_point now) const;
    // Takes every block's recent() bitmap: the distinct pages dirtied since the last take.
    uint64_t take_working_set();

    DirtyTracker& tracker_;
    const GuestMemory& memory_;
    std::chrono::milliseconds period_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool stop_ = false;
    DirtyRate rate_;
    uint64_t pages_since_sample_ = 0;
    uint64_t fast_pages_ = 0;   // harvested in the periods' first tenths, since start
    double fast_seconds_ = 0;   // those tenths' time
    std::chrono::steady_clock::time_point last_;
    std::deque<Snapshot> history_;  // one a period, the newest last
    std::chrono::steady_clock::time_point working_set_since_;
    std::vector<uint64_t> scratch_;  // take_working_set()'s, on the sampler's thread only
    uint64_t periods_ = 0;           // periods ended, counted on the sampler's thread only
    std::thread thread_;
};

}  // namespace vmm::memory
