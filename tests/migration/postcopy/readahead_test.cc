#include "vmm/migration/postcopy/readahead.h"

#include <gtest/gtest.h>

namespace vmm::migration {

// A guest faulting its way forward: the window opens on the second request in order and doubles
// up to the maximum, each time counting from where the last burst ended.
TEST(ReadaheadWindow, RequestsInOrderOpenAndDoubleItUpToTheMaximum) {
    ReadaheadWindow w(100);
    EXPECT_EQ(w.on_request(0, 1000, 1), 0u) << "one request says nothing about order";
    EXPECT_EQ(w.on_request(0, 1005, 1), 16u);
    EXPECT_EQ(w.on_request(0, 1006 + 16, 1), 32u) << "right past the burst";
    EXPECT_EQ(w.on_request(0, 1023 + 32 + 10, 1), 64u) << "a little past it: the push went on";
    EXPECT_EQ(w.on_request(0, 1066 + 64, 1), 100u) << "capped";
    EXPECT_EQ(w.on_request(0, 1131 + 100, 1), 100u);
}

// Anywhere else closes it: backwards, the same page again, too far on, another block.
TEST(ReadaheadWindow, ARequestOutOfOrderClosesIt) {
    ReadaheadWindow w(256);
    auto open = [&] {
        w.on_request(0, 0, 1);
        ASSERT_EQ(w.on_request(0, 2, 1), 16u);
    };
    open();
    EXPECT_EQ(w.on_request(0, 1, 1), 0u) << "backwards";
    open();
    EXPECT_EQ(w.on_request(0, 2, 1), 0u) << "the same page";
    open();
    EXPECT_EQ(w.on_request(0, 3 + 16 + 64, 1), 0u) << "beyond its reach";
    open();
    EXPECT_EQ(w.on_request(1, 3, 1), 0u) << "another block";
    EXPECT_EQ(w.on_request(1, 4, 1), 16u) << "and in order there it opens again";
}

TEST(ReadaheadWindow, AMaximumOfZeroNeverOpensIt) {
    ReadaheadWindow w(0);
    for (uint64_t p = 0; p < 10; ++p) EXPECT_EQ(w.on_request(0, p, 1), 0u);
}

// x-postcopy-readahead changed during a migration: the next request sees the new maximum.
TEST(ReadaheadWindow, ANewMaximumAppliesFromTheNextRequest) {
    ReadaheadWindow w(0);
    EXPECT_EQ(w.on_request(0, 0, 1), 0u);
    EXPECT_EQ(w.on_request(0, 1, 1), 0u) << "in order, but none allowed";
    w.set_max(64);
    EXPECT_EQ(w.on_request(0, 2, 1), 16u) << "opens now";
    EXPECT_EQ(w.on_request(0, 3 + 16, 1), 32u);
    w.set_max(16);
    EXPECT_EQ(w.on_request(0, 20 + 32, 1), 16u) << "shrunk to the new maximum";
    w.set_max(0);
    EXPECT_EQ(w.on_request(0, 53 + 16, 1), 0u) << "closed";
}

}  // namespace vmm::migration
