// Latency samples and their summary (p50, p99, max), for whoever times something repeatedly:
// migration's fault and serve latencies, the rdma plugin's READs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vmm {

// Latency figures of a set of samples, in microseconds.
struct LatencySummary {
    uint64_t count = 0;
    double p50_us = 0, p99_us = 0, max_us = 0;
};
LatencySummary summarize(std::vector<double> samples_us);

// Latencies as they come: the first kMaxSamples kept for the percentiles, the count and the
// maximum over all of them.
class LatencySamples {
public:
    void add(double us);
    LatencySummary summary() const;

private:
    static constexpr size_t kMaxSamples = 1u << 20;
    std::vector<double> kept_;
    uint64_t count_ = 0;
    double max_ = 0;
};

}  // namespace vmm
