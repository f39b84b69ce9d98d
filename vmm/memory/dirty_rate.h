// DirtyRateSampler: syncs the dirty tracker on a fixed period and keeps the rate at which the
// guest dirties pages, so `info ramblocks` and `info dirty-rate` show live numbers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "vmm/memory/dirty_tracker.h"

namespace vmm::memory {

struct DirtyRate {
    double pages_per_second = 0;
    uint64_t pages_in_last_period = 0;
    uint64_t total_pages = 0;  // harvested since start
    uint64_t samples = 0;
    double period_seconds = 0;
};

class DirtyRateSampler {
public:
    DirtyRateSampler(DirtyTracker& tracker, std::chrono::milliseconds period);
    ~DirtyRateSampler();
    DirtyRateSampler(const DirtyRateSampler&) = delete;
    DirtyRateSampler& operator=(const DirtyRateSampler&) = delete;

    // Syncs now (e.g. before showing counts); returns the tracker's error, if any.
    Status sync_now();
    DirtyRate rate() const;

private:
    void loop();
    Status sample(bool count_as_period);

    DirtyTracker& tracker_;
    std::chrono::milliseconds period_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool stop_ = false;
    DirtyRate rate_;
    uint64_t pages_since_sample_ = 0;
    std::chrono::steady_clock::time_point last_;
    std::thread thread_;
};

}  // namespace vmm::memory
