#include "vmm/common/latency.h"

#include <algorithm>

namespace vmm {

LatencySummary summarize(std::vector<double> samples_us) {
    LatencySummary s;
    s.count = samples_us.size();
    if (samples_us.empty()) return s;
    std::sort(samples_us.begin(), samples_us.end());
    auto at = [&](double q) { return samples_us[static_cast<size_t>(q * static_cast<double>(samples_us.size() - 1))]; };
    s.p50_us = at(0.50);
    s.p99_us = at(0.99);
    s.max_us = samples_us.back();
    return s;
}

void LatencySamples::add(double us) {
    if (kept_.size() < kMaxSamples) kept_.push_back(us);
    ++count_;
    max_ = std::max(max_, us);
}

LatencySummary LatencySamples::summary() const {
    LatencySummary s = summarize(kept_);
    s.count = count_;
    s.max_us = max_;
    return s;
}

}  // namespace vmm
