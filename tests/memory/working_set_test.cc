#include "vmm/memory/working_set.h"

#include <gtest/gtest.h>

#include <utility>

#include "vmm/memory/dirty_rate.h"

namespace vmm::memory {

namespace {
// Dirties pages [first, first + count) of block 0 (256 pages) in the period under way.
void dirty(WorkingSet& ws, uint64_t first, uint64_t count) {
    std::vector<uint64_t> bits(4, 0);
    for (uint64_t p = first; p < first + count; ++p) bits[(p % 256) / 64] |= uint64_t{1} << (p % 64);
    ws.add(0, bits.data(), bits.size());
}
}  // namespace

// A hot set rewritten every period is itself over any window; a page dirtied twice counts once.
TEST(WorkingSet, AHotSetCountsOnceHoweverOftenItIsRewritten) {
    WorkingSet ws;
    EXPECT_EQ(ws.distinct(4), 0u) << "no period ended yet";
    for (int i = 0; i < 40; ++i) {
        dirty(ws, 0, 10);
        dirty(ws, 5, 10);  // pages 5..9 again, 10..14 new: 15 in all
        ws.end_period();
    }
    EXPECT_EQ(ws.periods_ended(), 40u);
    EXPECT_EQ(ws.distinct(1), 15u);
    EXPECT_EQ(ws.distinct(4), 15u);
    EXPECT_EQ(ws.distinct(WorkingSet::kPeriods), 15u);
    EXPECT_EQ(ws.distinct(1000), 15u) << "at most kPeriods";
}

// A stream over 64 pages, 8 a period, comes round every 8 periods: a window shorter than that
// sees what it wrote, a longer one the 64 pages.
TEST(WorkingSet, AStreamShowsItsBoundOnlyOverAWindowLongerThanAPass) {
    WorkingSet ws;
    for (uint64_t period = 0; period < 50; ++period) {
        dirty(ws, (period * 8) % 64, 8);
        ws.end_period();
    }
    EXPECT_EQ(ws.distinct(4), 32u);
    EXPECT_EQ(ws.distinct(8), 64u);
    EXPECT_EQ(ws.distinct(16), 64u);
    EXPECT_EQ(ws.distinct(32), 64u);
}

// Pages that leave the window are no longer counted, and dirtied again count in their new period
// only; a window longer than the periods ended so far counts what there is.
TEST(WorkingSet, PagesLeaveTheWindowAndComeBackInTheirNewPeriod) {
    WorkingSet ws;
    dirty(ws, 0, 100);
    ws.end_period();
    EXPECT_EQ(ws.distinct(32), 100u) << "one period ended: a longer window counts that one";
    for (uint32_t i = 0; i < WorkingSet::kPeriods; ++i) ws.end_period();
    EXPECT_EQ(ws.distinct(WorkingSet::kPeriods), 0u) << "the 100 pages are now older than every window";
    dirty(ws, 50, 100);  // 50..99 were counted once, long ago; 100..149 never
    ws.end_period();
    EXPECT_EQ(ws.distinct(1), 100u);
    EXPECT_EQ(ws.distinct(WorkingSet::kPeriods), 100u);
    for (uint32_t i = 0; i < 2 * WorkingSet::kPeriods; ++i) ws.end_period();  // the slots come round twice
    EXPECT_EQ(ws.distinct(WorkingSet::kPeriods), 0u);
}

// Blocks are counted together; one first seen late starts clean.
TEST(WorkingSet, BlocksAddUp) {
    WorkingSet ws;
    dirty(ws, 0, 3);
    std::vector<uint64_t> other(2, ~uint64_t{0});
    ws.add(2, other.data(), other.size());
    ws.end_period();
    EXPECT_EQ(ws.distinct(1), 3u + 128u);
}

namespace {
using Hot = std::pair<uint64_t, double>;
// The hot set choose_working_set finds among these windows, and the length of the window it took.
Hot hot_of(std::vector<DirtyRate::Window> windows) {
    DirtyRate r;
    r.windows = std::move(windows);
    choose_working_set(r);
    return {r.hot_set_pages, r.working_set_seconds};
}
}  // namespace

// The hot set is where the set the guest keeps to stops growing as the window doubles; a guest
// writing new pages in every window has none.
TEST(WorkingSet, TheHotSetIsWhereTheSetStopsGrowing) {
    EXPECT_EQ(hot_of({}), Hot(0, 0)) << "no window yet";
    // A 32 MiB stream (8192 pages) rewritten every 14 s at 585 pages a second: 4 and 8 s write
    // new pages only; 16 s writes 9360 over the 8192; 32 s goes twice round.
    EXPECT_EQ(hot_of({{4, 2340, 2340}, {8, 4680, 4680}, {16, 8192, 9360}, {32, 8192, 18720}}), Hot(8192, 32));
    // Watched for 20 s only: the one window that kept to a set.
    EXPECT_EQ(hot_of({{4, 2340, 2340}, {8, 4680, 4680}, {16, 8192, 9360}}), Hot(8192, 16));
    // Every 15.5 s (as measured here at 2.3 MB/s): 16 s holds one pass and a little, written
    // over a share too small to tell; 32 s holds the same pages, written twice.
    EXPECT_EQ(hot_of({{4, 2221, 2228}, {8, 4364, 4379}, {16, 8193, 8747}, {32, 8194, 17663}}), Hot(8194, 32));
    // 100 pages rewritten all the time after 5000 written once 20 s ago: the 32 s window holds
    // those too, but the set stopped growing at 8 s; with no flat step seen, the shortest.
    EXPECT_EQ(hot_of({{4, 100, 4000}, {8, 100, 8000}, {16, 100, 16000}, {32, 5100, 37000}}), Hot(100, 8));
    EXPECT_EQ(hot_of({{4, 100, 4000}, {8, 5100, 13000}}), Hot(100, 4));
    EXPECT_EQ(hot_of({{4, 0, 0}, {8, 0, 0}}), Hot(0, 4)) << "idle";
}

// With no hot set, the working set shown is the shortest window's.
TEST(WorkingSet, AGuestWritingNewPagesAllTheTimeHasNoHotSet) {
    DirtyRate r;
    r.windows = {{4, 2340, 2340}, {8, 4680, 4700}, {16, 9000, 9360}};
    choose_working_set(r);
    EXPECT_EQ(r.hot_set_pages, 0u);
    EXPECT_EQ(r.working_set_pages, 2340u);
    EXPECT_EQ(r.working_set_seconds, 4);
}

}  // namespace vmm::memory
