// vCPU state survives save -> encode -> decode -> load, and is complete: a second machine
// given the first one's RAM, device state and vCPU state carries on running the guest.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"

namespace vmm::test {

using namespace std::chrono_literals;

namespace {
uint64_t tsc_of(const machine::VcpuState& s) {
    for (const auto& m : s.msrs)
        if (m.index == machine::kMsrTsc) return m.data;
    return 0;
}

std::vector<machine::VcpuState> encode_decode(const std::vector<machine::VcpuState>& in) {
    ByteWriter w;
    for (const auto& s : in) machine::encode_vcpu_state(w, s);
    ByteReader r(w.bytes(), "vcpus");
    std::vector<machine::VcpuState> out;
    for (size_t i = 0; i < in.size(); ++i) {
        auto s = machine::decode_vcpu_state(r);
        EXPECT_TRUE(s) << s.error().message();
        if (s) out.push_back(std::move(*s));
    }
    EXPECT_TRUE(r.expect_end());
    return out;
}
}  // namespace

TEST(VcpuState, RoundTripsAndResumesTheGuestOnASecondMachine) {
    VMM_REQUIRE(need::kvm());
    auto spec = small_spec(2);
    auto a = boot(spec, "stress", "bytes=1M");
    ASSERT_TRUE(a);
    ASSERT_TRUE(a->run().resume());
    ASSERT_TRUE(wait_for([&] { return a->control().report().steps >= 3; }, 60s));
    a->run().pause();
    auto saved = a->save_vcpus();
    ASSERT_TRUE(saved) << saved.error().message();
    auto decoded = encode_decode(*saved);
    ASSERT_EQ(decoded.size(), saved->size());
    for (size_t i = 0; i < decoded.size(); ++i) EXPECT_TRUE(machine::same_state((*saved)[i], decoded[i], false));

    auto created = machine::Machine::create(spec);
    ASSERT_TRUE(created) << created.error().message();
    auto& b = *created;
    for (size_t i = 0; i < a->memory().blocks().size(); ++i) {
        const auto& from = *a->memory().blocks()[i];
        std::memcpy(b->memory().blocks()[i]->host(), from.host(), from.size());
    }
    ByteWriter devices;
    a->save_devices(devices);
    ByteReader dr(devices.bytes(), "devices");
    ASSERT_TRUE(b->load_devices(dr));
    ASSERT_TRUE(b->load_vcpus(decoded));
    auto reread = b->save_vcpus();
    ASSERT_TRUE(reread);
    for (size_t i = 0; i < decoded.size(); ++i) {
        EXPECT_EQ(machine::first_difference(decoded[i], (*reread)[i], true), "") << "vCPU " << i;
        EXPECT_GE(tsc_of((*reread)[i]), tsc_of(decoded[i])) << "the TSC went backwards on vCPU " << i;
    }
    uint64_t steps = b->control().report().steps;
    EXPECT_EQ(steps, a->control().report().steps);
    ASSERT_TRUE(b->run().resume());
    EXPECT_TRUE(wait_for([&] { return b->control().report().steps >= steps + 2; }, 60s))
        << "the guest did not carry on from the loaded state";
    EXPECT_EQ(a->control().report().steps, steps) << "the source must stay paused";
}

TEST(VcpuState, RefusedWhileRunning) {
    VMM_REQUIRE(need::kvm());
    auto m = boot(small_spec(1), "stress", "bytes=1M");
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->run().resume());
    ASSERT_TRUE(wait_for([&] { return m->control().report().steps >= 1; }, 60s));
    auto s = m->save_vcpus();
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("pause the machine first"), std::string::npos);
}

}  // namespace vmm::test
