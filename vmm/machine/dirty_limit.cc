// DirtyLimiter (dirty_limit.h).
#include "vmm/machine/dirty_limit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "vmm/common/thread_name.h"

namespace vmm::machine {

namespace {
constexpr uint32_t kMaxThrottle = 99;  // VcpuThrottle's
}  // namespace

uint32_t throttle_for_limit(double measured, uint32_t percent, double limit) {
    percent = std::min(percent, kMaxThrottle);
    double own = measured / (1.0 - percent / 100.0);
    double want = own <= limit || own <= 0 ? 0 : 100.0 * (1.0 - limit / own);
    auto target = static_cast<uint32_t>(std::clamp(std::ceil(want), 0.0, static_cast<double>(kMaxThrottle)));
    if (target >= percent) return target;
    return target + (percent - target) / 2;  // let go by half the way
}

std::optional<double> common_cap(const std::vector<double>& rates, double total) {
    double sum = std::accumulate(rates.begin(), rates.end(), 0.0);
    if (rates.empty() || sum <= total) return std::nullopt;
    if (total <= 0) return 0.0;
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    // Water-filling: the k slowest keep their rate, the rest share what is left equally.
    double below = 0;
    for (size_t k = 0; k < sorted.size(); ++k) {
        double cap = (total - below) / static_cast<double>(sorted.size() - k);
        if (cap <= sorted[k]) return cap;
        below += sorted[k];
    }
    return std::nullopt;  // not reached: sum > total
}

DirtyLimiter::~DirtyLimiter() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (size_t i = 0; i < percent_.size(); ++i)
        if (percent_[i] != 0) vcpus_.set_vcpu_throttle(i, 0);
}

Status DirtyLimiter::set(std::optional<uint32_t> cpu, uint64_t pages_per_s) {
    size_t n = vcpus_.count();
    if (cpu && *cpu >= n) return Error(fmt::format("vCPU {}: this guest has vCPUs 0 to {}", *cpu, n - 1));
    std::lock_guard lock(mutex_);
    limit_.resize(n, 0), percent_.resize(n, 0), current_.resize(n, 0);
    for (size_t i = 0; i < n; ++i) {
        if (cpu && i != *cpu) continue;
        limit_[i] = pages_per_s;
        if (pages_per_s == 0 && percent_[i] != 0) {  // lifted at once
            percent_[i] = 0;
            vcpus_.set_vcpu_throttle(i, 0);
        }
    }
    if (pages_per_s != 0 && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
    cv_.notify_all();
    return {};
}

std::vector<DirtyLimiter::Row> DirtyLimiter::rows() const {
    std::lock_guard lock(mutex_);
    std::vector<Row> out;
    for (size_t i = 0; i < limit_.size(); ++i)
        if (limit_[i] != 0) out.push_back({static_cast<uint32_t>(i), limit_[i], current_[i], percent_[i]});
    return out;
}

std::vector<double> DirtyLimiter::vcpu_rates() const {
    memory::DirtyWindow w = sampler_.window(period_);
    std::vector<double> out;
    if (w.seconds <= 0) return out;
    for (uint64_t pages : w.vcpu_pages) out.push_back(static_cast<double>(pages) / w.seconds);
    return out;
}

std::vector<double> DirtyLimiter::unthrottled_rates() const {
    std::vector<double> rates = vcpu_rates();
    std::vector<uint32_t> throttles = vcpus_.vcpu_throttles();
    for (size_t i = 0; i < rates.size() && i < throttles.size(); ++i)
        rates[i] /= 1.0 - std::min(throttles[i], kMaxThrottle) / 100.0;
    return rates;
}

void DirtyLimiter::adjust_locked(const std::vector<double>& rates) {
    std::vector<uint32_t> now = vcpus_.vcpu_throttles();  // with auto-converge's, where it is higher
    for (size_t i = 0; i < limit_.size(); ++i) {
        current_[i] = i < rates.size() ? rates[i] : 0;
        if (limit_[i] == 0) continue;
        uint32_t in_force = std::max(percent_[i], i < now.size() ? now[i] : 0);
        uint32_t p = throttle_for_limit(current_[i], in_force, static_cast<double>(limit_[i]));
        if (p != percent_[i]) vcpus_.set_vcpu_throttle(i, p);
        percent_[i] = p;
    }
}

void DirtyLimiter::loop() {
    name_this_thread("dirty-limit");
    std::unique_lock lock(mutex_);
    while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
        lock.unlock();
        std::vector<double> rates = vcpu_rates();  // the sampler's lock, not this one
        lock.lock();
        if (!rates.empty()) adjust_locked(rates);
    }
}

}  // namespace vmm::machine
