// VcpuThrottle: auto-converge's brake, and the dirty limit's (dirty_limit.h). At `percent`, a
// vCPU is kicked out of the guest each 10 ms slice (QEMU's CPU_THROTTLE_TIMESLICE_NS) and sleeps
// percent/(100-percent) of a slice before it re-enters, so it runs (100 - percent) % of the time
// and dirties that much less. set() throttles every vCPU (auto-converge), set_vcpu() one (a dirty
// limit); each vCPU sleeps the higher of the two. Its own thread kicks the vCPUs throttled at all,
// while any is; at 0 everywhere the kicks and the sleeps stop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "vmm/machine/vcpu_runner.h"

namespace vmm::machine {

class VcpuThrottle {
public:
    // `runners` must outlive the throttle (the machine destroys it first).
    explicit VcpuThrottle(const std::vector<std::unique_ptr<VcpuRunner>>& runners) : runners_(runners) {}
    ~VcpuThrottle();  // stops and joins the kicking thread
    VcpuThrottle(const VcpuThrottle&) = delete;
    VcpuThrottle& operator=(const VcpuThrottle&) = delete;

    void set(uint32_t percent);  // every vCPU; 0 = off; at most 99
    uint32_t percent() const;    // set()'s
    void set_vcpu(size_t cpu, uint32_t percent);  // one vCPU's own; 0 = off; at most 99
    std::vector<uint32_t> vcpu_percents() const;  // what each vCPU sleeps: the higher of the two

private:
    void kick_loop();
    void apply_locked();  // each runner's sleep; the kicking thread started when any sleeps
    uint32_t effective_locked(size_t cpu) const;

    const std::vector<std::unique_ptr<VcpuRunner>>& runners_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    uint32_t percent_ = 0;
    std::vector<uint32_t> own_;  // set_vcpu()'s, by vCPU (missing: 0)
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace vmm::machine
