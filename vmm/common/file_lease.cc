#include "vmm/common/file_lease.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace vmm {

namespace {
// The holders' callbacks by their descriptors: the signals thread looks them up.
std::mutex g_mutex;
std::map<int, std::function<void()>>& holders() {
    static std::map<int, std::function<void()>> m;
    return m;
}
}  // namespace

Result<std::unique_ptr<FileLease>> FileLease::take(int fd, std::string path, std::function<void()> on_break) {
    sigset_t blocked;
    if (::pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || sigismember(&blocked, SIGIO) != 1) {
        return Error(fmt::format("{}: cannot guard the file (no signal watcher takes SIGIO in this process)", path));
    }
    UniqueFd own(::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDONLY | O_CLOEXEC));
    if (!own) return Error::from_errno(fmt::format("{}: opening it again to guard it", path));
    if (::fcntl(own.get(), F_SETSIG, SIGIO) != 0 || ::fcntl(own.get(), F_SETOWN, ::getpid()) != 0) {
        return Error::from_errno(fmt::format("{}: setting up its lease signal", path));
    }
    {
        std::lock_guard lock(g_mutex);
        holders()[own.get()] = std::move(on_break);
    }
    if (::fcntl(own.get(), F_SETLEASE, F_RDLCK) != 0) {
        int e = errno;
        std::lock_guard lock(g_mutex);
        holders().erase(own.get());
        const char* hint = e == EAGAIN   ? "another process has it open for writing, so it could change under the guest"
                           : e == EACCES ? "only its owner (or CAP_LEASE) may take a lease on it"
                                         : "its file system may not offer leases";
        return Error::from_errno(fmt::format("{}: taking a read lease on it", path), e, hint);
    }
    return std::unique_ptr<FileLease>(new FileLease(std::move(own), std::move(path)));
}

void FileLease::release() {
    if (!fd_) return;
    (void)::fcntl(fd_.get(), F_SETLEASE, F_UNLCK);
    std::lock_guard lock(g_mutex);
    holders().erase(fd_.get());
    fd_.reset();
}

FileLease::~FileLease() { release(); }

void FileLease::broken(int fd) {
    std::function<void()> fn;
    {
        std::lock_guard lock(g_mutex);
        auto it = holders().find(fd);
        if (it == holders().end()) return;
        fn = it->second;
    }
    fn();
}

}  // namespace vmm
