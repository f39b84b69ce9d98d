// RunControl: a machine's run state (QEMU's names: prelaunch, running, paused, inmigrate,
// postmigrate, shutdown, internal-error), the rules for moving between them, and what a
// monitor waits on (the end, a pause). It tells the vCPUs through a VcpuGroup and announces
// every change through `changed` (called without its lock held). No KVM here: tested alone.
//
//   prelaunch --set_incoming--> inmigrate --finish_incoming--> paused [--> running]
//   prelaunch/paused --resume--> running --pause / a guest step at pause_at_step--> paused
//   running/paused --set_postmigrate--> postmigrate (a source that handed its guest over)
//   any --vcpu_failed--> internal-error (the process and monitor stay, for inspection)
//   any --end--> shutdown (or the state given); final
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "vmm/common/result.h"

namespace vmm::machine {

// QEMU's names for the run states a monitor shows.
enum class RunState { prelaunch, running, paused, shutdown, internal_error, inmigrate, postmigrate };
std::string_view to_string(RunState s);

// What RunControl asks of the vCPUs (the machine's runners).
class VcpuGroup {
public:
    virtual ~VcpuGroup() = default;
    virtual void request_run() = 0;
    virtual void request_pause() = 0;     // returns at once; safe on a vCPU thread
    virtual void wait_not_running() = 0;  // until every vCPU acknowledged the last pause/stop
    virtual void request_stop() = 0;
};

class RunControl {
public:
    RunControl(VcpuGroup& vcpus, std::function<void(RunState)> changed)
        : vcpus_(vcpus), changed_(std::move(changed)) {}

    // Refused once ended, on an internal error, before an incoming migration completed, and
    // while a refusal is set unless `force` (which lifts it).
    Status resume(bool force = false);
    void refuse_resume(std::string why);  // "" lifts it
    // While set, the guest's state is not whole here: 'quit' must not exit 0. "" clears.
    void set_incomplete(std::string why);
    std::string incomplete() const;
    void pause();  // returns once every vCPU is out of the guest
    // Final: every vCPU stops; wait_for_end() returns `exit_code`. Safe from a vCPU thread.
    void end(int exit_code, RunState final_state = RunState::shutdown);
    int wait_for_end();
    void wait_until_paused();  // paused (e.g. by pause_at_step) or ended
    RunState state() const;
    bool has_ended() const;
    // Whether the vCPUs' state is worth saving: not ended, no internal error (else why not).
    Status state_usable() const;

    void set_incoming();
    void set_postmigrate();
    Status finish_incoming(bool stay_paused);
    // A vCPU could not go on: internal-error, every vCPU paused. Safe from a vCPU thread.
    void vcpu_failed();
    // Test hook: pause once the guest reports step >= `step` (0 = off).
    void pause_at_step(uint64_t step);
    void guest_step(uint64_t step);  // from a vCPU thread: the guest's progress report

private:
    VcpuGroup& vcpus_;
    std::function<void(RunState)> changed_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    RunState state_ = RunState::prelaunch;
    bool ended_ = false;
    int exit_code_ = 0;
    std::string resume_refusal_;
    std::string incomplete_;
    uint64_t pause_step_ = 0;
};

}  // namespace vmm::machine
