// DirtyLimiter: a dirty-page rate limit per vCPU, as QEMU's set-vcpu-dirty-limit. Each period it
// reads what every limited vCPU dirtied (the dirty ring says who wrote each page) and sets that
// vCPU's own throttle (vcpu_throttle.h) so it dirties no more than its limit; a vCPU under its
// limit runs free, so a migration's deadline (x-deadline-strategy dirty-limit) slows only the
// vCPUs that dirty faster than the link can follow, not the whole guest as auto-converge does.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/machine/vcpus.h"
#include "vmm/memory/dirty_rate.h"

namespace vmm::machine {

// The throttle, in percent, that brings a vCPU which dirtied `measured` pages/s while throttled
// at `percent` down to `limit` pages/s (its own rate is measured / (1 - percent/100)). Up at
// once; down by half the way a period, so a vCPU that went quiet under its throttle is let go
// gradually rather than freed and caught again.
uint32_t throttle_for_limit(double measured, uint32_t percent, double limit);

// The one limit for every vCPU (pages/s) that brings vCPUs dirtying `rates` to `total` in all:
// the vCPUs under it keep their rate, those over it are held to it (sum of min(rate, cap) is
// total). None when they dirty no more than `total` already.
std::optional<double> common_cap(const std::vector<double>& rates, double total);

class DirtyLimiter {
public:
    DirtyLimiter(Vcpus& vcpus, memory::DirtyRateSampler& sampler, std::chrono::milliseconds period)
        : vcpus_(vcpus), sampler_(sampler), period_(period) {}
    ~DirtyLimiter();  // stops and joins its thread, every vCPU's limit throttle lifted
    DirtyLimiter(const DirtyLimiter&) = delete;
    DirtyLimiter& operator=(const DirtyLimiter&) = delete;

    // `pages_per_s` for vCPU `cpu`, or for every vCPU; 0 lifts it.
    Status set(std::optional<uint32_t> cpu, uint64_t pages_per_s);

    struct Row {
        uint32_t cpu = 0;
        uint64_t limit = 0;     // pages/s
        double current = 0;     // pages/s, over the last period
        uint32_t throttle = 0;  // percent
    };
    std::vector<Row> rows() const;  // the limited vCPUs, in order

    // Each vCPU's rate were it not throttled: the measured rate over (1 - its throttle).
    std::vector<double> unthrottled_rates() const;

private:
    // What each vCPU dirtied over the last period, pages/s (empty before two samples).
    std::vector<double> vcpu_rates() const;
    void loop();
    void adjust_locked(const std::vector<double>& rates);

    Vcpus& vcpus_;
    memory::DirtyRateSampler& sampler_;
    std::chrono::milliseconds period_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::vector<uint64_t> limit_;     // by vCPU, pages/s (0: none)
    std::vector<uint32_t> percent_;   // by vCPU, the throttle this sets
    std::vector<double> current_;     // by vCPU, the last period's rate
    std::thread thread_;              // from the first limit on
};

}  // namespace vmm::machine
