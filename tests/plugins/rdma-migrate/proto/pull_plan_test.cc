// The destination's own push by RDMA READ: what it reads, and at what pace (proto/pull_plan.h).
#include "proto/pull_plan.h"

#include <gtest/gtest.h>

#include <string>

namespace rdma_migrate {

using Pieces = std::vector<PullPiece>;
using namespace std::chrono_literals;

std::vector<uint8_t> here(const std::string& map) {  // '#': resident here, '.': lacking
    std::vector<uint8_t> v;
    for (char c : map) v.push_back(c == '#' ? 1 : 0);
    return v;
}

TEST(PullPieces, OnlyThePagesLackingHereAreRead) {
    EXPECT_EQ(pull_pieces(here("########"), 16), Pieces{});
    EXPECT_EQ(pull_pieces(here("........"), 16), (Pieces{{0, 8}}));
    EXPECT_EQ(pull_pieces(here("#..##.#."), 16), (Pieces{{1, 2}, {5, 1}, {7, 1}}));
    EXPECT_EQ(pull_pieces({}, 16), Pieces{});
}

TEST(PullPieces, ARunIsCutIntoPiecesOfASlotAtMost) {
    EXPECT_EQ(pull_pieces(here(std::string(40, '.')), 16), (Pieces{{0, 16}, {16, 16}, {32, 8}}));
    EXPECT_EQ(pull_pieces(here("#....#"), 3), (Pieces{{1, 3}, {4, 1}}));
    EXPECT_EQ(pull_pieces(here("...."), 0), Pieces{}) << "no room: nothing";
}

TEST(PullPieces, OnlyBitZeroCounts) {
    std::vector<uint8_t> v{0xfe, 0x01, 0x02};  // mincore leaves the other bits undefined
    EXPECT_EQ(pull_pieces(v, 16), (Pieces{{0, 1}, {2, 1}}));
}

TEST(PullPace, NoRateMeansAtOnce) {
    PullPace pace(0);
    auto now = PullPace::Clock::now();
    pace.took(1 << 30, now);
    EXPECT_EQ(pace.when(1 << 30, now), now);
}

TEST(PullPace, AFullBucketGoesAtOnceThenTheRateHolds) {
    const uint64_t rate = 1 << 20;  // 1 MiB/s
    PullPace pace(rate, 256 * 1024);
    auto t0 = PullPace::Clock::time_point{} + 100s;  // long after the bucket was last empty: full
    EXPECT_LE(pace.when(64 * 1024, t0), t0);
    for (int i = 0; i < 4; ++i) pace.took(64 * 1024, t0);  // the burst: 256 KiB at once
    auto next = pace.when(64 * 1024, t0);
    EXPECT_GT(next, t0) << "the bucket is empty: the next piece waits";
    EXPECT_NEAR(std::chrono::duration<double>(next - t0).count(), 64.0 / 1024, 1e-6) << "64 KiB at 1 MiB/s";
    // A second at the rate: 1 MiB goes, no more.
    auto t = t0;
    uint64_t sent = 0;
    while (true) {
        auto w = std::max(pace.when(64 * 1024, t), t);
        if (w > t0 + 1s) break;
        pace.took(64 * 1024, w);
        sent += 64 * 1024;
        t = w;
    }
    EXPECT_EQ(sent, uint64_t{1} << 20);
}

TEST(PullPace, ANewRateAppliesToTheNextPiece) {
    PullPace pace(1 << 20, 64 * 1024);
    auto t0 = PullPace::Clock::time_point{} + 100s;
    pace.took(64 * 1024, t0);
    auto slow = pace.when(64 * 1024, t0);
    pace.set_rate(4 << 20);
    EXPECT_LT(pace.when(64 * 1024, t0), slow);
}

}  // namespace rdma_migrate
