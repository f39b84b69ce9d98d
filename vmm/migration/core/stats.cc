#include "vmm/migration/core/stats.h"

#include <algorithm>

namespace vmm::migration {

const char* to_string(MigrationStatus s) {
    switch (s) {
        case MigrationStatus::none: return "none";
        case MigrationStatus::setup: return "setup";
        case MigrationStatus::active: return "active";
        case MigrationStatus::device: return "device";
        case MigrationStatus::postcopy_active: return "postcopy-active";
        case MigrationStatus::postcopy_paused: return "postcopy-paused";
        case MigrationStatus::postcopy_recover: return "postcopy-recover";
        case MigrationStatus::completed: return "completed";
        case MigrationStatus::failed: return "failed";
        case MigrationStatus::cancelling: return "cancelling";
        case MigrationStatus::cancelled: return "cancelled";
        case MigrationStatus::precopy_paused: return "precopy-paused";
    }
    return "?";
}

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

bool is_terminal(MigrationStatus s) {
    return s == MigrationStatus::none || s == MigrationStatus::completed || s == MigrationStatus::failed ||
           s == MigrationStatus::cancelled;
}

}  // namespace vmm::migration
