// VmmProcess: one running vmm, held through a pidfd, so that its end is noticed at once (the
// pidfd turns readable) and a signal can never reach another process that reused its pid.
// vmmd starts each vmm in a session of its own: it outlives vmmd, and a restarted vmmd adopts it
// again by pid and start time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"

namespace vmmd {

using vmm::Result;
using vmm::Status;
using vmm::UniqueFd;

// A process as the kernel names it: its pid and its start time (/proc/PID/stat field 22, in
// clock ticks since boot). The pair names one process for as long as the machine is up.
struct ProcessIdentity {
    pid_t pid = 0;
    uint64_t start_ticks = 0;
    bool operator==(const ProcessIdentity&) const = default;
};

// How a process ended. A child of this vmmd is waited for; an adopted one is not ours to wait
// for, so how it ended is unknown.
struct ProcessEnding {
    enum class Kind { exited, killed, unknown } kind = Kind::unknown;
    int value = 0;  // the exit status, or the signal that killed it
};

// The process listening on the unix socket `path` (SO_PEERCRED of a connection to it), with its
// start time: how a restarted vmmd finds a vmm whose run record it cannot read. Connects and
// closes at once; a socket nobody listens on is an error.
Result<ProcessIdentity> socket_owner(const std::string& path);
// Whether process `pid` is the vmm serving QMP on `qmp_socket` (its command line says
// "--qmp unix:`qmp_socket`"): a run record naming another process is refused.
Status is_vmm_on(pid_t pid, const std::string& qmp_socket);

class VmmProcess {
public:
    // Starts `argv` in a new session with stdin from /dev/null and stdout and stderr appended to
    // `log_path`; RLIMIT_MEMLOCK is set to `memlock` bytes when given, and then the process also
    // loses CAP_IPC_LOCK, so that the limit binds even under a root vmmd (as it binds for
    // libvirt's unprivileged QEMU). An executable that cannot be run is an error with exec's
    // errno, not a process that exits at once.
    static Result<std::unique_ptr<VmmProcess>> spawn(const std::vector<std::string>& argv, const std::string& log_path,
                                                     std::optional<uint64_t> memlock);
    // A process started by an earlier vmmd. A pid that has ended, or that now names another
    // process (another start time), is an error.
    static Result<std::unique_ptr<VmmProcess>> adopt(ProcessIdentity id);

    ~VmmProcess();  // reaps a child that has ended, so none is left a zombie
    VmmProcess(const VmmProcess&) = delete;
    VmmProcess& operator=(const VmmProcess&) = delete;

    const ProcessIdentity& identity() const { return id_; }
    int pidfd() const { return pidfd_.get(); }  // readable once the process has ended
    bool ended() const;
    Status signal(int signo) const;
    // Once ended(): how (waits for a child, so call it once).
    ProcessEnding reap();

private:
    VmmProcess(ProcessIdentity id, UniqueFd pidfd, bool child) : id_(id), pidfd_(std::move(pidfd)), child_(child) {}
    ProcessIdentity id_;
    UniqueFd pidfd_;
    bool child_;
    bool reaped_ = false;
};

// The start time of `pid` from /proc (an error when there is no such process).
Result<uint64_t> process_start_ticks(pid_t pid);

}  // namespace vmmd
