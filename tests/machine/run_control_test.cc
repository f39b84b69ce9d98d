// RunControl: the run state's rules without KVM (a fake vCPU group records what it was asked):
// what resume refuses and when, the incoming and postmigrate paths, an internal error, a pause
// at a guest step from a vCPU thread, the end and who waits for it, and that every change is
// announced once, in order.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "vmm/machine/run_control.h"

namespace vmm::machine {
namespace {

struct FakeVcpus : VcpuGroup {
    std::atomic<int> runs{0}, pauses{0}, waits{0}, stops{0};
    void request_run() override { ++runs; }
    void request_pause() override { ++pauses; }
    void wait_not_running() override { ++waits; }
    void request_stop() override { ++stops; }
};

struct RunControlRules : ::testing::Test {
    FakeVcpus vcpus;
    std::vector<RunState> seen;
    RunControl run{vcpus, [this](RunState s) { seen.push_back(s); }};
};

TEST_F(RunControlRules, ResumeRunsThePausePausesAndEachChangeIsAnnounced) {
    EXPECT_EQ(run.state(), RunState::prelaunch);
    ASSERT_TRUE(run.resume());
    EXPECT_EQ(run.state(), RunState::running);
    EXPECT_EQ(vcpus.runs, 1);
    run.pause();
    EXPECT_EQ(run.state(), RunState::paused);
    EXPECT_EQ(vcpus.pauses, 1);
    EXPECT_GE(vcpus.waits, 1) << "pause returns only once the vCPUs are out of the guest";
    run.pause();  // already paused: nothing to announce
    EXPECT_EQ(seen, (std::vector<RunState>{RunState::running, RunState::paused}));
}

TEST_F(RunControlRules, ARefusalHoldsUntilAForcedResumeLiftsIt) {
    run.refuse_resume("the guest went on to the destination in postcopy");
    auto refused = run.resume();
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().message(), "the guest went on to the destination in postcopy");
    EXPECT_EQ(vcpus.runs, 0);
    ASSERT_TRUE(run.resume(true));
    run.pause();
    EXPECT_TRUE(run.resume()) << "a forced resume lifted the refusal";
}

TEST_F(RunControlRules, AnIncomingMachineRunsOnlyOnceItsMigrationFinished) {
    run.set_incoming();
    EXPECT_EQ(run.state(), RunState::inmigrate);
    EXPECT_FALSE(run.resume());
    ASSERT_TRUE(run.finish_incoming(false));  // paused, then running
    EXPECT_EQ(run.state(), RunState::running);
    EXPECT_FALSE(run.finish_incoming(true)) << "not waiting for a migration any more";
    run.set_incoming();  // only from prelaunch
    EXPECT_EQ(run.state(), RunState::running);
    EXPECT_EQ(seen, (std::vector<RunState>{RunState::inmigrate, RunState::paused, RunState::running}));
}

TEST_F(RunControlRules, AnIncomingMachineWithDashSStaysPaused) {
    run.set_incoming();
    ASSERT_TRUE(run.finish_incoming(true));
    EXPECT_EQ(run.state(), RunState::paused);
    EXPECT_EQ(vcpus.runs, 0);
}

TEST_F(RunControlRules, AnInternalErrorPausesEveryVcpuAndCannotBeResumedOrSaved) {
    ASSERT_TRUE(run.resume());
    EXPECT_TRUE(run.state_usable());
    run.vcpu_failed();
    EXPECT_EQ(run.state(), RunState::internal_error);
    EXPECT_EQ(vcpus.pauses, 1);
    auto r = run.resume();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find("internal error"), std::string::npos);
    auto usable = run.state_usable();
    ASSERT_FALSE(usable);
    EXPECT_NE(usable.error().message().find("internal-error"), std::string::npos) << usable.error().message();
}

TEST_F(RunControlRules, TheEndIsFinalAndWakesItsWaiterWithTheExitCode) {
    ASSERT_TRUE(run.resume());
    std::atomic<int> code{-1};
    std::thread waiter([&] { code = run.wait_for_end(); });
    run.end(7);
    waiter.join();
    EXPECT_EQ(code, 7);
    EXPECT_TRUE(run.has_ended());
    EXPECT_EQ(vcpus.stops, 1);
    run.end(0);  // a second end changes nothing
    EXPECT_EQ(run.wait_for_end(), 7);
    EXPECT_FALSE(run.resume());
    run.set_postmigrate();
    run.vcpu_failed();
    EXPECT_EQ(run.state(), RunState::shutdown);
    EXPECT_FALSE(run.state_usable());
}

TEST_F(RunControlRules, AGuestStepPausesAtTheStepAskedOnceAndWakesTheWaiter) {
    ASSERT_TRUE(run.resume());
    run.pause_at_step(10);
    run.guest_step(9);
    EXPECT_EQ(run.state(), RunState::running);
    std::thread vcpu([&] { run.guest_step(10); });  // from a vCPU thread: it must not wait for itself
    run.wait_until_paused();
    vcpu.join();
    EXPECT_EQ(run.state(), RunState::paused);
    ASSERT_TRUE(run.resume());
    run.guest_step(11);
    EXPECT_EQ(run.state(), RunState::running) << "the hook fires once";
}

TEST_F(RunControlRules, APostmigrateSourceKeepsItsReasonToQuitUnclean) {
    ASSERT_TRUE(run.resume());
    run.set_postmigrate();
    EXPECT_EQ(run.state(), RunState::postmigrate);
    run.set_incomplete("the destination still lacks 12 pages");
    EXPECT_EQ(run.incomplete(), "the destination still lacks 12 pages");
    run.set_incomplete("");
    EXPECT_EQ(run.incomplete(), "");
}

}  // namespace
}  // namespace vmm::machine
