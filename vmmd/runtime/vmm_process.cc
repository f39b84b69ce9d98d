#include "vmmd/runtime/vmm_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vmmd/domain/atomic_file.h"

namespace vmmd {

using vmm::Error;

namespace {

constexpr unsigned kCloseRangeCloexec = 1U << 2;  // CLOSE_RANGE_CLOEXEC (Linux 5.11)

Result<UniqueFd> open_pidfd(pid_t pid) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return Error::from_errno(fmt::format("pidfd_open {}", pid));
    return UniqueFd(fd);
}

// The child's side of spawn, between fork and exec: only async-signal-safe calls. A failure
// writes errno to `report` (close-on-exec, so a successful exec closes it with nothing written).
[[noreturn]] void fail_to(int report) {
    int e = errno;
    (void)!::write(report, &e, sizeof e);
    ::_exit(127);
}

[[noreturn]] void become(char* const* argv, const char* log_path, const rlimit* memlock, int report) {
    auto fail = [report]() { fail_to(report); };
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // vmmd's watcher blocks SIGINT and SIGTERM
    ::signal(SIGPIPE, SIG_DFL);
    if (::setsid() < 0) fail();
    if (memlock != nullptr) {
        if (::setrlimit(RLIMIT_MEMLOCK, memlock) != 0) fail();
        // The limit must bind: CAP_IPC_LOCK (root's) would let the process lock past it. Out of
        // the bounding set it is gone from the exec'd program too. EPERM: vmmd is not privileged
        // and neither is its child.
        if (::prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) != 0 && errno != EPERM) fail();
        if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) fail();
    }
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || out < 0) fail();
    if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) fail();
    if (::syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec) != 0) fail();
    ::execv(argv[0], argv);
    fail_to(report);
}

}  // namespace

Result<uint64_t> process_start_ticks(pid_t pid) {
    auto stat = read_small_file(fmt::format("/proc/{}/stat", pid), 4096);
    if (!stat) return stat.error();
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so count from the last ')'.
    size_t close = stat->rfind(')');
    if (close == std::string::npos) return Error(fmt::format("/proc/{}/stat has no command name", pid));
    const char* p = stat->c_str() + close + 1;
    for (int field = 3; field < 22; ++field) {
        p = std::strchr(p + 1, ' ');
        if (p == nullptr) return Error(fmt::format("/proc/{}/stat is shorter than 22 fields", pid));
    }
    char* end = nullptr;
    unsigned long long ticks = std::strtoull(p + 1, &end, 10);
    if (end == p + 1) return Error(fmt::format("/proc/{}/stat: field 22 is not a number", pid));
    return static_cast<uint64_t>(ticks);
}

Result<ProcessIdentity> socket_owner(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) return Error(fmt::format("{}: the path is too long for a unix socket", path));
    path.copy(a.sun_path, path.size());
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) return Error::from_errno("socket");
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EAGAIN) {
        return Error::from_errno("connect to " + path);
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Error::from_errno("SO_PEERCRED on " + path);
    if (cred.pid <= 0) return Error(fmt::format("{}: the kernel names no process behind it", path));
    auto ticks = process_start_ticks(cred.pid);
    if (!ticks) return ticks.error();
    return ProcessIdentity{cred.pid, *ticks};
}

Status is_vmm_on(pid_t pid, const std::string& qmp_socket) {
    auto cmdline = read_small_file(fmt::format("/proc/{}/cmdline", pid), 1 << 16);
    if (!cmdline) return cmdline.error();
    std::string want = std::string("--qmp") + '\0' + "unix:" + qmp_socket + '\0';
    if (cmdline->find(want) == std::string::npos) {
        return Error(fmt::format("process {} is not the vmm serving {} (its command line does not say so)", pid, qmp_socket));
    }
    return {};
}

Result<std::unique_ptr<VmmProcess>> VmmProcess::spawn(const std::vector<std::string>& argv, const std::string& log_path,
                                                      std::optional<uint64_t> memlock) {
    if (argv.empty()) return Error("spawn: no program");
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    rlimit limit{memlock.value_or(0), memlock.value_or(0)};
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) return Error::from_errno("pipe2");
    UniqueFd read_end(report[0]), write_end(report[1]);
    pid_t pid = ::fork();
    if (pid < 0) return Error::from_errno("fork");
    if (pid == 0) become(args.data(), log_path.c_str(), memlock ? &limit : nullptr, write_end.get());
    write_end.reset();
    int child_errno = 0;
    ssize_t got;
    do got = ::read(read_end.get(), &child_errno, sizeof child_errno);
    while (got < 0 && errno == EINTR);
    auto pidfd = open_pidfd(pid);
    if (got == sizeof child_errno || !pidfd) {
        ::waitpid(pid, nullptr, 0);
        if (!pidfd) return pidfd.error();
        return Error::from_errno(fmt::format("start {}", argv[0]) +
                                     (memlock ? fmt::format(" (with RLIMIT_MEMLOCK {} bytes)", *memlock) : ""),
                                 child_errno);
    }
    auto ticks = process_start_ticks(pid);
    return std::unique_ptr<VmmProcess>(new VmmProcess({pid, ticks ? *ticks : 0}, std::move(*pidfd), true));
}

Result<std::unique_ptr<VmmProcess>> VmmProcess::adopt(ProcessIdentity id) {
    auto pidfd = open_pidfd(id.pid);
    if (!pidfd) return pidfd.error();
    // Read the start time after opening the pidfd: if it still matches, the pidfd holds that process.
    auto ticks = process_start_ticks(id.pid);
    if (!ticks) return Error(fmt::format("process {} has ended", id.pid));
    if (*ticks != id.start_ticks) {
        return Error(fmt::format("process {} is another process now (started at tick {}, not {})", id.pid, *ticks, id.start_ticks));
    }
    return std::unique_ptr<VmmProcess>(new VmmProcess(id, std::move(*pidfd), false));
}

VmmProcess::~VmmProcess() {
    if (child_ && !reaped_ && ended()) reap();
}

bool VmmProcess::ended() const {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
}

Status VmmProcess::signal(int signo) const {
    if (::syscall(SYS_pidfd_send_signal, pidfd_.get(), signo, nullptr, 0) != 0 && errno != ESRCH) {
        return Error::from_errno(fmt::format("signal {} to vmm process {}", signo, id_.pid));
    }
    return {};
}

ProcessEnding VmmProcess::reap() {
    if (!child_ || reaped_) return {};
    siginfo_t info{};
    int r;
    do r = ::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED);
    while (r != 0 && errno == EINTR);
    reaped_ = true;
    if (r != 0) return {};
    if (info.si_code == CLD_EXITED) return {ProcessEnding::Kind::exited, info.si_status};
    return {ProcessEnding::Kind::killed, info.si_status};
}

}  // namespace vmmd
