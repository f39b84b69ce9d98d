#include "vmm/machine/run_control.h"

#include <fmt/format.h>

namespace vmm::machine {

std::string_view to_string(RunState s) {
    switch (s) {
        case RunState::prelaunch: return "prelaunch";
        case RunState::running: return "running";
        case RunState::paused: return "paused";
        case RunState::shutdown: return "shutdown";
        case RunState::internal_error: return "internal-error";
        case RunState::inmigrate: return "inmigrate";
        case RunState::postmigrate: return "postmigrate";
    }
    return "?";
}

void RunControl::refuse_resume(std::string why) {
    std::lock_guard lock(mutex_);
    resume_refusal_ = std::move(why);
}

void RunControl::set_incomplete(std::string why) {
    std::lock_guard lock(mutex_);
    incomplete_ = std::move(why);
}

std::string RunControl::incomplete() const {
    std::lock_guard lock(mutex_);
    return incomplete_;
}

Status RunControl::resume(bool force) {
    {
        std::lock_guard lock(mutex_);
        if (ended_) return Error("the machine has ended");
        if (!force && !resume_refusal_.empty()) return Error(resume_refusal_);
        if (state_ == RunState::internal_error) {
            return Error("a vCPU hit an internal error: inspect with 'info registers', then quit");
        }
        if (state_ == RunState::inmigrate) return Error("an incoming migration has not completed yet");
        resume_refusal_.clear();  // resumed (forced, if it had to be): a later pause and resume is plain
        state_ = RunState::running;
    }
    vcpus_.request_run();
    if (changed_) changed_(RunState::running);
    return {};
}

void RunControl::pause() {
    vcpus_.request_pause();
    vcpus_.wait_not_running();
    bool changed = false;
    {
        std::lock_guard lock(mutex_);
        if (!ended_ && state_ == RunState::running) {
            state_ = RunState::paused;
            changed = true;
        }
    }
    cv_.notify_all();
    if (changed && changed_) changed_(RunState::paused);
}

void RunControl::end(int exit_code, RunState final_state) {
    {
        std::lock_guard lock(mutex_);
        if (ended_) return;
        ended_ = true;
        exit_code_ = exit_code;
        state_ = final_state;
    }
    vcpus_.request_stop();
    cv_.notify_all();
    if (changed_) changed_(final_state);
}

int RunControl::wait_for_end() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return ended_; });
    return exit_code_;
}

void RunControl::wait_until_paused() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return ended_ || state_ == RunState::paused; });
    lock.unlock();
    vcpus_.wait_not_running();
}

RunState RunControl::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

bool RunControl::has_ended() const {
    std::lock_guard lock(mutex_);
    return ended_;
}

Status RunControl::state_usable() const {
    // A vCPU that triple-faulted or failed has no state worth keeping (on AMD, KVM even resets
    // it after a shutdown): migrating it would start the destination from garbage.
    std::lock_guard lock(mutex_);
    if (!ended_ && state_ != RunState::internal_error) return {};
    return Error(fmt::format("the guest has stopped for good (state {}): its vCPU state cannot be saved", to_string(state_)));
}

void RunControl::set_incoming() {
    {
        std::lock_guard lock(mutex_);
        if (state_ != RunState::prelaunch) return;
        state_ = RunState::inmigrate;
    }
    if (changed_) changed_(RunState::inmigrate);
}

Status RunControl::finish_incoming(bool stay_paused) {
    {
        std::lock_guard lock(mutex_);
        if (state_ != RunState::inmigrate) return Error("the machine is not waiting for a migration");
        state_ = RunState::paused;
    }
    if (changed_) changed_(RunState::paused);
    return stay_paused ? Status{} : resume();
}

void RunControl::set_postmigrate() {
    {
        std::lock_guard lock(mutex_);
        if (ended_) return;
        state_ = RunState::postmigrate;
    }
    if (changed_) changed_(RunState::postmigrate);
}

void RunControl::vcpu_failed() {
    {
        std::lock_guard lock(mutex_);
        if (ended_) return;
        state_ = RunState::internal_error;
    }
    vcpus_.request_pause();
    cv_.notify_all();
    if (changed_) changed_(RunState::internal_error);
}

void RunControl::pause_at_step(uint64_t step) {
    std::lock_guard lock(mutex_);
    pause_step_ = step;
}

void RunControl::guest_step(uint64_t step) {
    {
        std::lock_guard lock(mutex_);
        if (pause_step_ == 0 || step < pause_step_ || state_ != RunState::running) return;
        pause_step_ = 0;
        state_ = RunState::paused;
    }
    // On a vCPU thread: request only; waiters use wait_until_paused().
    vcpus_.request_pause();
    cv_.notify_all();
    if (changed_) changed_(RunState::paused);
}

}  // namespace vmm::machine
