// DirtyRateSampler: syncs the dirty tracker on a fixed period and keeps the rate at which the
// guest dirties pages, so `info ramblocks` and `info dirty-rate` show live numbers.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "vmm/memory/dirty_tracker.h"
#include "vmm/memory/working_set.h"

namespace vmm::memory {

struct DirtyRate {
    double pages_per_second = 0;
    uint64_t pages_in_last_period = 0;
    uint64_t total_pages = 0;  // harvested since start
    uint64_t samples = 0;
    double period_seconds = 0;
    // What the guest dirtied over windows of kWorkingSetPeriods periods (the shortest first, those
    // the sampler has seen whole): its distinct pages, and what it wrote (the pages harvested there,
    // a page rewritten between two syncs counted each time).
    struct Window {
        double seconds = 0;
        uint64_t distinct_pages = 0;
        uint64_t written_pages = 0;
    };
    std::vector<Window> windows;
    // The working set (choose_working_set): the distinct pages of the window where the set the
    // guest kept to stopped growing, else of the shortest window that kept to one, else of the
    // shortest window.
    uint64_t working_set_pages = 0;
    double working_set_seconds = 0;  // 0: no window has ended yet
    // working_set_pages when the guest kept to a set there, 0 when it wrote new pages all the time
    // in every window: what no round leaves more dirty than, however long.
    uint64_t hot_set_pages = 0;
};

// Distinct pages under this share of those written over a window: the guest rewrote pages there.
inline constexpr double kKeepsToASet = 0.9;
// A window twice as long that adds no more than this: the set has stopped growing.
inline constexpr double kSetStopsGrowing = 1.1;
// The working set among `windows` (the shortest first), as DirtyRate holds it.
void choose_working_set(DirtyRate& r);

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

    static constexpr size_t kHistory = WorkingSet::kPeriods + 1;  // a snapshot at each end of the longest window
    // The windows' lengths in periods: the shortest sees a hot set rewritten each few seconds
    // soonest, the longest a stream that takes half a minute to come round.
    static constexpr std::array<uint32_t, 4> kWorkingSetPeriods{4, 8, 16, WorkingSet::kPeriods};

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
    // Takes every block's recent() bitmap (the distinct pages dirtied since the last take) into
    // working_set_ and ends its period.
    void take_working_set();
    // rate_'s windows, from working_set_ and history_ (the lock held).
    void update_windows_locked();

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
    WorkingSet working_set_;         // on the sampler's thread only (periods end there alone)
    std::vector<uint64_t> scratch_;  // take_working_set()'s, on the sampler's thread only
    std::thread thread_;
};

}  // namespace vmm::memory
