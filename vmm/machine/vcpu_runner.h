// VcpuRunner: one vCPU's thread and its explicit state machine.
//
//   requests:  run | pause | stop            (from any thread)
//   states:    paused  -> running -> paused  (acknowledged: waiters see the state change)
//              any     -> stopped            (final; the thread has left its loop)
//
// The thread only changes state between KVM_RUN calls. A request kicks the thread out of
// KVM_RUN with immediate_exit + a signal, so "paused" always means "not inside KVM_RUN and any
// I/O exit already completed" (KVM requires re-entering KVM_RUN once to complete an I/O exit
// before the vCPU's state is consistent; the runner does that with immediate_exit set).
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "vmm/common/result.h"
#include "vmm/kvm/vcpu.h"

namespace vmm::machine {

enum class VcpuRunState { paused, running, stopped };

// What the runner does after an exit was handled.
enum class ExitAction { resume, halt, stop };

class VcpuExitHandler {
public:
    virtual ~VcpuExitHandler() = default;
    // Called on the vCPU thread for every exit KVM_RUN returned.
    virtual ExitAction handle_exit(uint32_t cpu, kvm_run& run) = 0;
    // Called on the vCPU thread when KVM_RUN itself failed; the vCPU then stops.
    virtual void vcpu_failed(uint32_t cpu, const Error& error) = 0;
};

class VcpuRunner {
public:
    VcpuRunner(kvm::Vcpu& vcpu, VcpuExitHandler& handler);
    ~VcpuRunner();  // requests stop and joins the thread
    VcpuRunner(const VcpuRunner&) = delete;
    VcpuRunner& operator=(const VcpuRunner&) = delete;

    // Installs the (empty) signal handler used for kicks; call once per process.
    static void install_kick_signal();

    void start_thread();  // the thread starts paused
    void request_run();
    void request_pause();
    void request_stop();
    // Blocks until the vCPU acknowledged the last pause/stop request.
    void wait_until_not_running();
    VcpuRunState state() const;

    // For exit handlers, on this vCPU's thread: sleeps up to `ns`, returning early when a
    // pause or stop is requested.
    void sleep_interruptible(uint64_t ns);

    // Throttling (auto-converge): every kick() makes a running vCPU sleep `sleep_ns` before it
    // re-enters the guest. 0 turns it off.
    void set_throttle_sleep(uint64_t sleep_ns) { throttle_ns_ = sleep_ns; }
    void kick();
    // The vCPU thread's id (0 until it started): postcopy's fault thread tells vCPUs by it.
    uint32_t tid() const { return tid_; }

private:
    void thread_main();
    bool wait_for_run_request();  // false: stop requested
    void complete_pending_io();
    void kick_locked();

    kvm::Vcpu& vcpu_;
    VcpuExitHandler& handler_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    VcpuRunState requested_ = VcpuRunState::paused;
    VcpuRunState state_ = VcpuRunState::paused;
    bool halted_ = false;
    bool io_pending_ = false;
    std::thread thread_;
    pthread_t native_{};
    bool thread_started_ = false;
    std::atomic<uint64_t> throttle_ns_{0};
    std::atomic<uint32_t> tid_{0};
};

}  // namespace vmm::machine
