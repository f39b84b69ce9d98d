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
    std::lock_guard lock(mutex_);
    percent_ = std::min<uint32_t>(percent, 99);
    apply_locked();
}

uint32_t VcpuThrottle::percent() const {
    std::lock_guard lock(mutex_);
    return percent_;
}

void VcpuThrottle::set_vcpu(size_t cpu, uint32_t percent) {
    std::lock_guard lock(mutex_);
    if (own_.size() <= cpu) own_.resize(cpu + 1, 0);
    own_[cpu] = std::min<uint32_t>(percent, 99);
    apply_locked();
}

std::vector<uint32_t> VcpuThrottle::vcpu_percents() const {
    std::lock_guard lock(mutex_);
    std::vector<uint32_t> out;
    for (size_t i = 0; i < runners_.size(); ++i) out.push_back(effective_locked(i));
    return out;
}

uint32_t VcpuThrottle::effective_locked(size_t cpu) const {
    return std::max(percent_, cpu < own_.size() ? own_[cpu] : 0);
}

void VcpuThrottle::apply_locked() {
    bool any = false;
    for (size_t i = 0; i < runners_.size(); ++i) {
        uint32_t p = effective_locked(i);
        runners_[i]->set_throttle_sleep(p == 0 ? 0 : kSliceNs * p / (100 - p));
        any = any || p != 0;
    }
    if (any && !thread_.joinable()) thread_ = std::thread([this] { kick_loop(); });
    cv_.notify_all();
}

void VcpuThrottle::kick_loop() {
    name_this_thread("vcpu-throttle");
    std::unique_lock lock(mutex_);
    std::vector<size_t> kicked;
    while (!stop_) {
        kicked.clear();
        for (size_t i = 0; i < runners_.size(); ++i)
            if (effective_locked(i) != 0) kicked.push_back(i);
        if (kicked.empty()) {
            cv_.wait(lock);
            continue;
        }
        cv_.wait_for(lock, std::chrono::nanoseconds(kSliceNs));
        if (stop_) continue;
        lock.unlock();
        for (size_t i : kicked) runners_[i]->kick();
        lock.lock();
    }
}

}  // namespace vmm::machine
