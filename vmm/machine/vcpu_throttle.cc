#include "vmm/machine/vcpu_throttle.h"

#include <algorithm>
#include <chrono>

#include "vmm/common/thread_name.h"

namespace vmm::machine {

namespace {
constexpr uint64_t kSliceNs = 10'000'000;  // QEMU's CPU_THROTTLE_TIMESLICE_NS
}  // namespace

VcpuThrottle::~VcpuThrottle() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void VcpuThrottle::set(uint32_t percent) {
    percent = std::min<uint32_t>(percent, 99);
    uint64_t sleep_ns = percent == 0 ? 0 : kSliceNs * percent / (100 - percent);
    for (const auto& r : runners_) r->set_throttle_sleep(sleep_ns);
    std::lock_guard lock(mutex_);
    percent_ = percent;
    if (percent != 0 && !thread_.joinable()) thread_ = std::thread([this] { kick_loop(); });
    cv_.notify_all();
}

uint32_t VcpuThrottle::percent() const {
    std::lock_guard lock(mutex_);
    return percent_;
}

void VcpuThrottle::kick_loop() {
    name_this_thread("vcpu-throttle");
    std::unique_lock lock(mutex_);
    while (!stop_) {
        if (percent_ == 0) {
            cv_.wait(lock);
            continue;
        }
        cv_.wait_for(lock, std::chrono::nanoseconds(kSliceNs));
        if (percent_ == 0 || stop_) continue;
        lock.unlock();
        for (const auto& r : runners_) r->kick();
        lock.lock();
    }
}

}  // namespace vmm::machine
