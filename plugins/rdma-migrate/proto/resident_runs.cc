#include "proto/resident_runs.h"

namespace rdma_migrate {

namespace {
std::vector<std::pair<uint64_t, uint64_t>> joined(const std::vector<std::pair<uint64_t, uint64_t>>& runs, uint64_t gap) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const auto& r : runs) {
        if (!out.empty() && r.first - out.back().second < gap) {
            out.back().second = r.second;
        } else {
            out.push_back(r);
        }
    }
    return out;
}
}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> resident_runs(std::span<const uint8_t> resident, uint64_t gap, size_t max_runs) {
    std::vector<std::pair<uint64_t, uint64_t>> runs;
    for (uint64_t p = 0; p < resident.size();) {
        if ((resident[p] & 1) == 0) {
            ++p;
            continue;
        }
        uint64_t first = p;
        while (p < resident.size() && (resident[p] & 1) != 0) ++p;
        runs.emplace_back(first, p);
    }
    runs = joined(runs, gap);
    for (uint64_t g = gap == 0 ? 1 : gap; max_runs != 0 && runs.size() > max_runs; g *= 2) runs = joined(runs, g * 2);
    return runs;
}

}  // namespace rdma_migrate
