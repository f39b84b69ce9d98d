#include "vmm/common/signal_watcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <memory>

#include "vmm/common/file_lease.h"
#include "vmm/common/thread_name.h"

namespace vmm {

Result<std::unique_ptr<SignalWatcher>> SignalWatcher::create(std::function<void(int)> on_signal) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGIO);
    if (int e = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); e != 0) return Error::from_errno("pthread_sigmask", e);
    UniqueFd sfd(::signalfd(-1, &set, SFD_CLOEXEC));
    if (!sfd) return Error::from_errno("signalfd");
    UniqueFd stop(::eventfd(0, EFD_CLOEXEC));
    if (!stop) return Error::from_errno("eventfd");
    return std::unique_ptr<SignalWatcher>(new SignalWatcher(std::move(sfd), std::move(stop), std::move(on_signal)));
}

SignalWatcher::SignalWatcher(UniqueFd sfd, UniqueFd stop, std::function<void(int)> cb)
    : signal_fd_(std::move(sfd)), stop_fd_(std::move(stop)), on_signal_(std::move(cb)) {
    thread_ = std::thread([this] { loop(); });
}

SignalWatcher::~SignalWatcher() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_fd_.get(), &one, sizeof(one));
    thread_.join();
}

void SignalWatcher::loop() {
    name_this_thread("signals");
    for (;;) {
        pollfd fds[2] = {{signal_fd_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) continue;
        if (fds[1].revents != 0) return;
        signalfd_siginfo info{};
        if (::read(signal_fd_.get(), &info, sizeof(info)) != sizeof(info)) continue;
        if (info.ssi_signo == SIGIO) {
            FileLease::broken(info.ssi_fd);
        } else {
            on_signal_(static_cast<int>(info.ssi_signo));
        }
    }
}

}  // namespace vmm
