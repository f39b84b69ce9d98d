// ControlBuffers (plugins/rdma-migrate/control_buffers.h): the control channel's buffers, made
// ahead and kept as one spare a process; no RDMA device needed. Label unit.
#include <gtest/gtest.h>

#include <algorithm>

#include "control_buffers.h"

namespace rdma_migrate {
namespace {

bool all_zero(std::span<const uint8_t> s) {
    return std::all_of(s.begin(), s.end(), [](uint8_t b) { return b == 0; });
}

// Empties the spare, whatever an earlier test left there.
void drain_spare() {
    auto set = ControlBuffers::take();
    ASSERT_TRUE(set) << set.error().message();
}

TEST(ControlBuffers, ASetHasTwoReceivesAndASendOfTheControlBufferSizeApart) {
    auto set = ControlBuffers::make();
    ASSERT_TRUE(set) << set.error().message();
    const ControlBuffers& b = **set;
    EXPECT_EQ(b.receive(0).size(), kControlBufferSize);
    EXPECT_EQ(b.receive(1).size(), kControlBufferSize);
    EXPECT_EQ(b.send().size(), kControlBufferSize);
    EXPECT_EQ(b.receive(1).data(), b.receive(0).data() + kControlBufferSize);
    EXPECT_EQ(b.send().data(), b.receive(1).data() + kControlBufferSize);
    EXPECT_TRUE(all_zero(b.send()));
}

TEST(ControlBuffers, ASetGivenBackIsTheNextTakenAndWiped) {
    drain_spare();
    auto set = ControlBuffers::take();
    ASSERT_TRUE(set) << set.error().message();
    uint8_t* first = (*set)->receive(0).data();
    std::fill((*set)->receive(1).begin(), (*set)->receive(1).end(), 0xa5);
    std::fill((*set)->send().begin(), (*set)->send().end(), 0x5a);
    ControlBuffers::give_back(std::move(*set));
    auto again = ControlBuffers::take();
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ((*again)->receive(0).data(), first) << "the spare was not the set given back";
    EXPECT_TRUE(all_zero((*again)->receive(1))) << "a receive buffer kept the last migration's bytes";
    EXPECT_TRUE(all_zero((*again)->send())) << "the send buffer kept the last migration's bytes";
}

TEST(ControlBuffers, OneSpareAtMostAndTakingWithoutOneMakesASet) {
    drain_spare();
    ControlBuffers::make_spare();
    auto a = ControlBuffers::take();  // the spare
    auto b = ControlBuffers::take();  // none left: made now
    ASSERT_TRUE(a && b);
    EXPECT_NE((*a)->send().data(), (*b)->send().data());
    uint8_t* kept = (*a)->send().data();
    ControlBuffers::give_back(std::move(*a));
    ControlBuffers::give_back(std::move(*b));  // a spare is there already: this set is unmapped
    auto c = ControlBuffers::take();
    ASSERT_TRUE(c);
    EXPECT_EQ((*c)->send().data(), kept);
    ControlBuffers::make_spare();
    ControlBuffers::make_spare();  // one is there: nothing more is made
    auto d = ControlBuffers::take();
    auto e = ControlBuffers::take();
    ASSERT_TRUE(d && e);
    EXPECT_NE((*d)->send().data(), (*e)->send().data());
}

}  // namespace
}  // namespace rdma_migrate
