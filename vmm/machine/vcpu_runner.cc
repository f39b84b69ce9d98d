#include "vmm/machine/vcpu_runner.h"

#include <unistd.h>

#include <fmt/format.h>
#include <signal.h>

#include <chrono>

#include "vmm/common/thread_name.h"

namespace vmm::machine {

namespace {
constexpr int kKickSignal = SIGUSR1;
void on_kick(int) {}
}  // namespace

void VcpuRunner::install_kick_signal() {
    struct sigaction sa{};
    sa.sa_handler = on_kick;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: KVM_RUN must return EINTR
    ::sigaction(kKickSignal, &sa, nullptr);
}

VcpuRunner::VcpuRunner(kvm::Vcpu& vcpu, VcpuExitHandler& handler) : vcpu_(vcpu), handler_(handler) {}

VcpuRunner::~VcpuRunner() {
    if (!thread_started_) return;
    request_stop();
    thread_.join();
}

void VcpuRunner::start_thread() {
    std::lock_guard lock(mutex_);
    thread_ = std::thread([this] { thread_main(); });
    native_ = thread_.native_handle();
    thread_started_ = true;
}

void VcpuRunner::kick_locked() {
    // Under the mutex, so the thread cannot clear immediate_exit after we set it and before
    // it sees the new request (see wait_for_run_request).
    vcpu_.run_struct()->immediate_exit = 1;
    if (thread_started_) ::pthread_kill(native_, kKickSignal);
}

void VcpuRunner::kick() {
    std::lock_guard lock(mutex_);
    if (requested_ == VcpuRunState::running) kick_locked();
}

void VcpuRunner::request_run() {
    std::lock_guard lock(mutex_);
    if (requested_ == VcpuRunState::stopped) return;
    requested_ = VcpuRunState::running;
    cv_.notify_all();
}

void VcpuRunner::request_pause() {
    std::lock_guard lock(mutex_);
    if (requested_ == VcpuRunState::stopped) return;
    requested_ = VcpuRunState::paused;
    kick_locked();
    cv_.notify_all();
}

void VcpuRunner::request_stop() {
    std::lock_guard lock(mutex_);
    requested_ = VcpuRunState::stopped;
    kick_locked();
    cv_.notify_all();
}

void VcpuRunner::wait_until_not_running() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return state_ == requested_ || state_ == VcpuRunState::stopped; });
}

VcpuRunState VcpuRunner::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

void VcpuRunner::sleep_interruptible(uint64_t ns) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::nanoseconds(ns), [this] { return requested_ != VcpuRunState::running; });
}

bool VcpuRunner::wait_for_run_request() {
    std::unique_lock lock(mutex_);
    for (;;) {
        if (requested_ == VcpuRunState::stopped) return false;
        if (requested_ == VcpuRunState::running && !halted_) break;
        if (requested_ == VcpuRunState::paused) halted_ = false;  // a pause/resume wakes a halted vCPU
        if (state_ != requested_ && requested_ == VcpuRunState::paused) {
            lock.unlock();
            complete_pending_io();
            lock.lock();
            state_ = VcpuRunState::paused;
            cv_.notify_all();
            continue;
        }
        cv_.wait(lock);
    }
    state_ = VcpuRunState::running;
    vcpu_.run_struct()->immediate_exit = 0;
    cv_.notify_all();
    return true;
}

void VcpuRunner::complete_pending_io() {
    if (!io_pending_) return;
    // Re-enter once with immediate_exit set: KVM finishes the I/O instruction and returns
    // EINTR without running further guest code.
    vcpu_.run_struct()->immediate_exit = 1;
    (void)vcpu_.run();
    io_pending_ = false;
}

void VcpuRunner::thread_main() {
    name_this_thread(fmt::format("vcpu{}", vcpu_.id()));
    tid_ = static_cast<uint32_t>(::gettid());
    while (wait_for_run_request()) {
        auto r = vcpu_.run();
        if (!r) {
            handler_.vcpu_failed(vcpu_.id(), r.error());
            break;
        }
        if (*r == kvm::RunOutcome::interrupted) {
            if (uint64_t ns = throttle_ns_; ns != 0) sleep_interruptible(ns);
            continue;
        }
        uint32_t reason = vcpu_.run_struct()->exit_reason;
        io_pending_ = reason == KVM_EXIT_IO || reason == KVM_EXIT_MMIO;
        ExitAction action = handler_.handle_exit(vcpu_.id(), *vcpu_.run_struct());
        if (action == ExitAction::stop) break;
        if (action == ExitAction::halt) {
            std::lock_guard lock(mutex_);
            halted_ = true;
        }
    }
    complete_pending_io();
    std::lock_guard lock(mutex_);
    state_ = VcpuRunState::stopped;
    requested_ = VcpuRunState::stopped;
    cv_.notify_all();
}

}  // namespace vmm::machine
