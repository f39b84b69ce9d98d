// Device state of a running machine round-trips into a fresh machine, and bad state is refused
// without changing anything.
#include <gtest/gtest.h>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"

namespace vmm::test {

using namespace std::chrono_literals;

TEST(DeviceState, RoundTripsBetweenMachines) {
    VMM_REQUIRE(need::kvm());
    auto a = boot(small_spec(1), "pattern", "bytes=1M check=256");
    ASSERT_TRUE(a);
    ASSERT_TRUE(a->run().resume());
    ASSERT_TRUE(wait_for([&] { return a->control().report().steps >= 1 && a->control().report().max_pause_ns > 0; }, 60s));
    a->run().pause();
    ByteWriter w;
    a->save_devices(w);
    auto b = machine::Machine::create(small_spec(1));
    ASSERT_TRUE(b);
    ByteReader r(w.bytes(), "devices");
    ASSERT_TRUE((*b)->load_devices(r));
    EXPECT_TRUE(r.expect_end());
    ByteWriter w2;
    (*b)->save_devices(w2);
    EXPECT_EQ(w.bytes(), w2.bytes());
    EXPECT_EQ(a->control().report(), (*b)->control().report());
    EXPECT_EQ(a->control().report().last_message, "pattern: filled");
}

TEST(DeviceState, MismatchedOrTruncatedStateIsRefused) {
    VMM_REQUIRE(need::kvm());
    auto a = machine::Machine::create(small_spec(1));
    ASSERT_TRUE(a);
    ByteWriter w;
    (*a)->save_devices(w);
    std::vector<uint8_t> cut(w.bytes().begin(), w.bytes().end() - 3);
    ByteReader r(cut, "devices");
    EXPECT_FALSE((*a)->load_devices(r));
    ByteWriter wrong;
    wrong.put(uint32_t{2});
    wrong.put_string("keyboard");
    ByteReader wr(wrong.bytes(), "devices");
    auto s = (*a)->load_devices(wr);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message(), "device state: found 'keyboard' where 'serial0' was expected");
}

}  // namespace vmm::test
