// Which pages of a stretch of the source's RAM are worth exposing for the destination's RDMA
// READs (kCapPostcopyRead): those the process has (mincore). A page never touched is not
// missing at the destination (never-populated pages are not sent: they are zero there), while
// registering it would make and pin it: under TCG that made a 64 MiB region cost a second or
// more, which the push waited for. Pure: it reads mincore's answer, not memory.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace rdma_migrate {

// [first, end) page runs of `resident` (mincore's vector: bit 0 of each byte) whose pages are
// resident, runs less than `gap` pages apart joined (a registration costs more than a few
// pages pinned for nothing), and joined further (the gap doubled) until at most `max_runs`
// remain.
std::vector<std::pair<uint64_t, uint64_t>> resident_runs(std::span<const uint8_t> resident, uint64_t gap, size_t max_runs);

}  // namespace rdma_migrate
