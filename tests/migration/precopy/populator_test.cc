// Populator: populates the announced run ahead of the receiver, never more than kAhead ahead
// and never outside the run, and a new run replaces the old one.
#include "vmm/migration/precopy/populator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "tests/support/wait.h"
#include "vmm/common/mapping.h"
#include "vmm/common/units.h"

namespace vmm::migration {

using vmm::test::wait_for;

namespace {

// Resident 4 KiB pages in [p, p + len).
uint64_t resident_pages(uint8_t* p, uint64_t len) {
    std::vector<unsigned char> v(len / 4096);
    if (::mincore(p, len, v.data()) != 0) return 0;
    uint64_t n = 0;
    for (unsigned char c : v) n += c & 1;
    return n;
}

// Waits (up to 10 s) until the helper has populated `bytes`.
bool wait_populated(Populator& p, uint64_t bytes) {
    return wait_for([&] { return p.populated_bytes() >= bytes; }, std::chrono::seconds(10));
}
}  // namespace

TEST(Populator, PopulatesTheRunAheadOfTheReceiverAndNoFurther) {
#ifndef MADV_POPULATE_WRITE
    GTEST_SKIP() << "needs MADV_POPULATE_WRITE (Linux 5.14 headers)";
#endif
    auto m = Mapping::map("test RAM", 128 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    ASSERT_TRUE(m);
    ::madvise(m->data(), m->size(), MADV_NOHUGEPAGE);  // count pages exactly
    uint8_t* run = m->data() + 8 * MiB;  // the run: [8 MiB, 72 MiB)
    Populator p;
    p.expect(run, 64 * MiB);
    // Nothing received yet: the helper goes kAhead (32 MiB) into the run and stops.
    ASSERT_TRUE(wait_populated(p, Populator::kAhead));
    // Then that it stops there: only a window can show it (the helper signals nothing when it
    // rests); 100 ms is far longer than it takes to populate the next MiB, so one past the mark shows.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(p.populated_bytes(), Populator::kAhead);
    EXPECT_EQ(resident_pages(run, Populator::kAhead), Populator::kAhead / 4096);
    EXPECT_EQ(resident_pages(run + Populator::kAhead, 32 * MiB), 0u);
    EXPECT_EQ(resident_pages(m->data(), 8 * MiB), 0u);  // never before the run
    EXPECT_EQ(p.ready(run + 4 * MiB, 4 * MiB), 4 * MiB);
    EXPECT_EQ(p.ready(run + 30 * MiB, 4 * MiB), 2 * MiB);  // partly
    EXPECT_EQ(p.ready(m->data(), 4096), 0u);          // outside the run
    // The receiver writes 40 MiB and moves on: the helper skips what the receiver passed and
    // follows to the end of the run, not beyond.
    std::memset(run, 0x5a, 40 * MiB);
    p.received(run + 40 * MiB);
    ASSERT_TRUE(wait_populated(p, Populator::kAhead + 24 * MiB));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // and stops at the run's end (as above)
    EXPECT_EQ(p.populated_bytes(), Populator::kAhead + 24 * MiB);
    EXPECT_EQ(resident_pages(run, 64 * MiB), 64 * MiB / 4096);
    EXPECT_EQ(resident_pages(run + 64 * MiB, 128 * MiB - 72 * MiB), 0u);
}

TEST(Populator, ANewRunReplacesTheOldOne) {
#ifndef MADV_POPULATE_WRITE
    GTEST_SKIP() << "needs MADV_POPULATE_WRITE (Linux 5.14 headers)";
#endif
    auto m = Mapping::map("test RAM", 128 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    ASSERT_TRUE(m);
    ::madvise(m->data(), m->size(), MADV_NOHUGEPAGE);
    Populator p;
    p.expect(m->data(), 4 * MiB);
    ASSERT_TRUE(wait_populated(p, 4 * MiB));
    p.expect(m->data() + 64 * MiB, 6 * MiB);
    EXPECT_EQ(p.ready(m->data(), 4096), 0u);  // the old run no longer counts
    ASSERT_TRUE(wait_populated(p, 10 * MiB));
    EXPECT_EQ(resident_pages(m->data() + 64 * MiB, 6 * MiB), 6 * MiB / 4096);
    EXPECT_EQ(p.ready(m->data() + 64 * MiB, 8 * MiB), 6 * MiB);
    p.received(m->data() + 100 * MiB);  // outside the run: ignored
    EXPECT_EQ(p.ready(m->data() + 64 * MiB, 8 * MiB), 6 * MiB);
}

}  // namespace vmm::migration
