// Each payload boots in long mode and reports through the control device; the run state
// machine pauses and resumes every vCPU.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/support/require.h"
#include "tests/support/kvm_fixture.h"
#include "vmm/machine/payload.h"

namespace vmm::test {

using namespace std::chrono_literals;
using machine::RunState;

struct PayloadCase {
    const char* name;
    const char* params;
    const char* banner;
    const char* label = nullptr;  // the case's name, when not the payload's
};

class EachPayloadBoots : public ::testing::TestWithParam<PayloadCase> {};

TEST_P(EachPayloadBoots, AndReportsProgress) {
    VMM_REQUIRE(need::kvm());
    SerialLog serial;
    auto spec = small_spec(2);
    spec.serial_sink = serial.sink();
    auto m = boot(spec, GetParam().name, GetParam().params);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->run().state(), RunState::prelaunch);
    ASSERT_TRUE(m->run().resume());
    ASSERT_TRUE(wait_for([&] { return m->control().report().steps >= 2; }, 60s))
        << "serial output so far: " << serial.get();
    EXPECT_NE(serial.get().find(GetParam().banner), std::string::npos) << serial.get();
    EXPECT_EQ(m->control().report().errors, 0u);
    EXPECT_EQ(m->run().state(), RunState::running);
}

INSTANTIATE_TEST_SUITE_P(Payloads, EachPayloadBoots,
                         ::testing::Values(PayloadCase{"idle", "tick_ms=20", "idle: running on 2 cpu(s)"},
                                           PayloadCase{"stress", "bytes=1M", "stress: 1 MiB at 0x0000000000400000"},
                                           PayloadCase{"pattern", "bytes=1M check=64", "pattern: filling 1 MiB"},
                                           // Resting between steps (as the nested VM's tests ask)
                                           // they step on, and the pattern guest finds no error.
                                           PayloadCase{"stress", "bytes=1M rest_us=2000", "stress: 1 MiB", "stress_resting"},
                                           PayloadCase{"pattern", "bytes=1M check=64 rest_us=2000", "pattern: filling 1 MiB",
                                                       "pattern_resting"}),
                         [](const auto& param_info) {
                             const PayloadCase& c = param_info.param;
                             return std::string(c.label ? c.label : c.name);
                         });

TEST(Machine, PauseStopsEveryVcpuAndResumeRestartsThem) {
    VMM_REQUIRE(need::kvm());
    auto m = boot(small_spec(2), "stress", "bytes=1M");
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->run().resume());
    ASSERT_TRUE(wait_for([&] { return m->control().report().steps >= 2; }, 60s));
    m->run().pause();
    EXPECT_EQ(m->run().state(), RunState::paused);
    ASSERT_TRUE(m->dirty_rate().sync_now());
    uint64_t steps = m->control().report().steps;
    uint64_t dirtied = m->memory().blocks()[0]->dirtied();
    // That a paused guest does nothing can only be seen over a window (no signal marks "still
    // nothing"): 300 ms is many steps of the stress guest on KVM, so one running vCPU would show.
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(m->dirty_rate().sync_now());
    EXPECT_EQ(m->control().report().steps, steps);
    EXPECT_EQ(m->memory().blocks()[0]->dirtied(), dirtied) << "a paused guest dirtied memory";
    ASSERT_TRUE(m->run().resume());
    EXPECT_TRUE(wait_for([&] { return m->control().report().steps > steps + 1; }, 60s));
    ASSERT_TRUE(m->dirty_rate().sync_now());
    EXPECT_GT(m->memory().blocks()[0]->dirtied(), dirtied);
}

TEST(Machine, GuestExitEndsTheMachineWithItsCode) {
    VMM_REQUIRE(need::kvm());
    auto m = boot(small_spec(2), "stress", "bytes=256K passes=3");
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->run().resume());
    ASSERT_TRUE(wait_for([&] { return m->run().has_ended(); }, 60s));
    EXPECT_EQ(m->run().wait_for_end(), 0);
    EXPECT_EQ(m->run().state(), RunState::shutdown);
    EXPECT_EQ(m->control().report().last_message, "stress: done");
    EXPECT_FALSE(m->run().resume());
    auto saved = m->save_vcpus();
    ASSERT_FALSE(saved) << "an ended machine's vCPU state must not be saved (nor migrated)";
    EXPECT_NE(saved.error().message().find("stopped for good"), std::string::npos) << saved.error().message();
}

TEST(Machine, AGuestCpuExceptionIsReportedAndEndsTheMachine) {
    VMM_REQUIRE(need::kvm());
    SerialLog serial;
    auto spec = small_spec(2);
    spec.serial_sink = serial.sink();
    auto m = boot(spec, "idle", "tick_ms=10 fault=2");
    ASSERT_TRUE(m);
    ASSERT_TRUE(m->run().resume());
    ASSERT_TRUE(wait_for([&] { return m->run().has_ended(); }, 60s)) << serial.get();
    EXPECT_EQ(m->run().wait_for_end(), 128 + 13) << "exit code 128 + vector of #GP";
    EXPECT_EQ(m->control().report().errors, 1u);
    EXPECT_EQ(m->control().report().last_error, 13u);
    EXPECT_EQ(m->control().report().last_message.rfind("payload: CPU exception #GP at rip 0x", 0), 0u)
        << m->control().report().last_message;
}

TEST(Machine, BadPayloadsAreRefusedWithAReason) {
    VMM_REQUIRE(need::kvm());
    auto m = machine::Machine::create(small_spec());
    ASSERT_TRUE(m);
    std::string not_elf = ::testing::TempDir() + "/not-a-payload.txt";
    {
        std::ofstream f(not_elf);
        f << "#!/bin/sh\necho this is a script, not a payload\n";
    }
    auto s = (*m)->boot(not_elf, "");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message().find("not an ELF file"), std::string::npos) << s.error().message();
    auto tiny = machine::Machine::create(small_spec(1, 1ull << 20));  // 1 MiB: no room above 1 MiB
    ASSERT_TRUE(tiny);
    auto path = machine::resolve_payload("idle");
    ASSERT_TRUE(path);
    auto t = (*tiny)->boot(*path, "");
    ASSERT_FALSE(t);
    EXPECT_NE(t.error().message().find("give the guest more memory"), std::string::npos) << t.error().message();
}

}  // namespace vmm::test
