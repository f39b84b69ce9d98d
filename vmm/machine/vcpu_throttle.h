// VcpuThrottle: auto-converge's brake. At `percent`, every vCPU is kicked out of the guest each
// 10 ms slice (QEMU's CPU_THROTTLE_TIMESLICE_NS) and sleeps percent/(100-percent) of a slice
// before it re-enters, so the guest runs (100 - percent) % of the time and dirties that much
// less. Its own thread kicks while the throttle is on; set(0) stops the kicks and the sleeps.
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

    void set(uint32_t percent);  // 0 = off; at most 99
    uint32_t percent() const;

private:
    void kick_loop();

    const std::vector<std::unique_ptr<VcpuRunner>>& runners_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    uint32_t percent_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace vmm::machine
