#include "vmm/migration/core/eta.h"

#include <algorithm>

namespace vmm::migration {

namespace {
// Rounds the model follows before it says "no end": q just under 1 takes many, none useful.
constexpr uint32_t kMaxRounds = 1000;
}  // namespace

std::optional<Eta> precopy_eta(const EtaFacts& f) {
    if (f.link_bytes_per_s <= 0) return std::nullopt;
    double per_ms = f.link_bytes_per_s / 1000.0;
    // What the last pause may carry besides the hand-over.
    double fits = std::max(0.0, f.downtime_limit_ms - f.handover_ms) * per_ms;
    double q = std::max(0.0, f.dirty_bytes_per_s) / f.link_bytes_per_s;
    Eta eta;
    double r = static_cast<double>(f.remaining_bytes);
    while (r > fits) {
        double next = r * q;
        if (f.hot_set_bytes > 0) next = std::min(next, f.hot_set_bytes);
        if (next >= r || eta.rounds == kMaxRounds) return eta;  // the rounds do not shrink: converges stays false
        eta.remaining_ms += r / per_ms;
        r = next;
        ++eta.rounds;
    }
    eta.converges = true;
    eta.downtime_ms = r / per_ms + f.handover_ms;
    eta.remaining_ms += eta.downtime_ms;
    return eta;
}

std::optional<Eta> postcopy_eta(uint64_t missing_bytes, double push_bytes_per_s) {
    if (missing_bytes == 0) return Eta{true, 0, 0, 0};
    if (push_bytes_per_s <= 0) return std::nullopt;
    return Eta{true, static_cast<double>(missing_bytes) / push_bytes_per_s * 1000.0, 0, 0};
}

}  // namespace vmm::migration
