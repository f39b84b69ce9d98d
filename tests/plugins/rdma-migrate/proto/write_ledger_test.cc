// WriteLedger: a completion for write i vouches for every byte posted through i (RC order),
// whatever was signalled in between; stale and unknown indexes change nothing.
#include <gtest/gtest.h>

#include "proto/write_ledger.h"

namespace rdma_migrate {

TEST(WriteLedger, ACompletionVouchesForEveryEarlierWrite) {
    WriteLedger l;
    for (uint64_t i = 1; i <= 64; ++i) l.post(1000 + i);  // unsignalled but the 64th
    uint64_t all = 64 * 1000 + 64 * 65 / 2;
    EXPECT_EQ(l.in_flight(), all);
    EXPECT_EQ(l.delivered(), 0u);
    l.completed(64);
    EXPECT_EQ(l.in_flight(), 0u);
    EXPECT_EQ(l.delivered(), all);
}

TEST(WriteLedger, CountsOnlyThroughTheCompletedWrite) {
    WriteLedger l;
    for (uint64_t i = 1; i <= 130; ++i) l.post(1 << 20);
    l.completed(64);
    EXPECT_EQ(l.delivered(), 64u << 20);
    EXPECT_EQ(l.in_flight(), 66u << 20);
    l.completed(32);  // older than what is known: changes nothing
    EXPECT_EQ(l.delivered(), 64u << 20);
    l.completed(131);  // never posted
    EXPECT_EQ(l.delivered(), 64u << 20);
    l.completed(128);
    EXPECT_EQ(l.in_flight(), 2u << 20);
}

TEST(WriteLedger, ADrainWriteAddsNoBytes) {
    WriteLedger l;
    l.post(4096);
    l.post(8192);
    l.post(0);  // the last write's 8 bytes again, signalled, to drain the lane
    EXPECT_EQ(l.in_flight(), 12288u);
    l.completed(3);
    EXPECT_EQ(l.in_flight(), 0u);
    EXPECT_EQ(l.delivered(), 12288u);
}

TEST(WriteLedger, WrapsAroundItsWindow) {
    WriteLedger l;
    uint64_t done = 0;
    for (uint64_t i = 1; i <= 10 * WriteLedger::kWindow; ++i) {
        EXPECT_EQ(l.post(i % 7 + 1), i);
        if (i % 64 == 0) {
            l.completed(i);
            done = l.delivered();
            EXPECT_EQ(l.in_flight(), 0u) << "at write " << i;
        }
    }
    EXPECT_GT(done, 0u);
    // A completion further back than the window cannot be resolved: it is ignored.
    l.post(5);
    l.completed(10 * WriteLedger::kWindow + 1 - WriteLedger::kWindow);
    EXPECT_EQ(l.delivered(), done);
}

}  // namespace rdma_migrate
