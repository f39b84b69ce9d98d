// SignalWatcher: turns SIGINT/SIGTERM into a callback on its own thread (via signalfd), so a
// Ctrl-C or a kill ends the VM cleanly instead of killing the process mid-write. It also takes
// SIGIO, the kernel's word that a file this process holds a lease on is about to change
// (file_lease.h), and hands it to the lease's holder.
// Construct it before any other thread: it blocks the signals for the threads created after.
#pragma once

#include <functional>
#include <thread>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"

namespace vmm {

class SignalWatcher {
public:
    static Result<std::unique_ptr<SignalWatcher>> create(std::function<void(int signo)> on_signal);
    ~SignalWatcher();
    SignalWatcher(const SignalWatcher&) = delete;
    SignalWatcher& operator=(const SignalWatcher&) = delete;

private:
    SignalWatcher(UniqueFd sfd, UniqueFd stop, std::function<void(int)> cb);
    void loop();

    UniqueFd signal_fd_;
    UniqueFd stop_fd_;
    std::function<void(int)> on_signal_;
    std::thread thread_;
};

}  // namespace vmm
