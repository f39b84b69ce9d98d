// The runs of resident pages the source exposes for RDMA READ (proto/resident_runs.h).
#include "proto/resident_runs.h"

#include <gtest/gtest.h>

namespace rdma_migrate {

using Runs = std::vector<std::pair<uint64_t, uint64_t>>;

std::vector<uint8_t> pages(const std::string& map) {  // '#': resident, '.': not
    std::vector<uint8_t> v;
    for (char c : map) v.push_back(c == '#' ? 1 : 0);
    return v;
}

TEST(ResidentRuns, RunsOfResidentPagesAndNothingForNone) {
    EXPECT_EQ(resident_runs(pages("........"), 1, 0), Runs{});
    EXPECT_EQ(resident_runs(pages("########"), 1, 0), (Runs{{0, 8}}));
    EXPECT_EQ(resident_runs(pages("..##...#"), 1, 0), (Runs{{2, 4}, {7, 8}}));
    EXPECT_EQ(resident_runs({}, 1, 0), Runs{});
}

TEST(ResidentRuns, OnlyBitZeroCounts) {
    std::vector<uint8_t> v{0xfe, 0x01, 0x03, 0x02};
    EXPECT_EQ(resident_runs(v, 1, 0), (Runs{{1, 3}}));
}

TEST(ResidentRuns, ShortGapsAreJoined) {
    EXPECT_EQ(resident_runs(pages("##..##.....##"), 3, 0), (Runs{{0, 6}, {11, 13}}));
    EXPECT_EQ(resident_runs(pages("##..##.....##"), 6, 0), (Runs{{0, 13}}));
}

TEST(ResidentRuns, AtMostMaxRunsByJoiningWiderGaps) {
    std::string map;
    for (int i = 0; i < 100; ++i) map += std::string(size_t(i % 7 + 1), '.') + "#";
    auto runs = resident_runs(pages(map), 1, 10);
    EXPECT_LE(runs.size(), 10u);
    ASSERT_FALSE(runs.empty());
    EXPECT_EQ(runs.front().first, 1u);
    EXPECT_EQ(runs.back().second, map.size());
    for (size_t i = 1; i < runs.size(); ++i) EXPECT_GT(runs[i].first, runs[i - 1].second);
}

}  // namespace rdma_migrate
