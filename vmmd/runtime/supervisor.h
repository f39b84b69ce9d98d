// Supervisor: the domains that run, one vmm process each, driven over its QMP socket in
// <state>/run. It starts them (DOMAIN_CREATE), stops them (shutdown: the vmm ends in order;
// destroy: SIGTERM, then SIGKILL), pauses and resumes them, and tells the DomainStore and a
// listener (lifecycle events) what happened. One watcher thread polls every process's pidfd, so a
// vmm that dies is noticed at once: a domain nobody stopped becomes "shut off (crashed)".
//
// The processes outlive vmmd: each runs in its own session, and <state>/run/<uuid>.json records
// it (RunRecord), with the phase of a migration it is in. A restarted vmmd adopts every recorded
// process that still runs and marks the others crashed. Adoption does not hold up the server: each
// vmm is put under watch at once (it cannot be started twice) and reached over QMP by a thread
// of its own; one that does not answer is shown "paused (unknown)", its pid kept, until it does
// (destroy works meanwhile). Then what the vmm says and the recorded phase decide what becomes
// of it (adoption.h). A run record that cannot be read is kept, and the domain cannot be started
// while it is there, unless the vmm behind its QMP socket is found and adopted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vmm/monitor/client/qmp_client.h"
#include "vmmd/domain/domain_store.h"
#include "vmmd/runtime/run_record.h"
#include "vmmd/runtime/vmm_process.h"

namespace vmmd {

using vmm::monitor::Json;

// A lifecycle event as libvirt numbers it (virDomainEventType and its detail).
struct LifecycleEvent {
    int event = 0;
    int detail = 0;
};

struct SupervisorPaths {
    std::string vmm;        // the vmm executable
    std::string state_dir;  // run/ (QMP sockets, run records) and log/ (one log per domain) go here
};

class Supervisor {
public:
    using Listener = std::function<void(const DomainDef& def, int id, LifecycleEvent e)>;

    // Makes run/ and log/, adopts what an earlier vmmd left running (`warn` hears about records
    // that could not be adopted), and starts the watcher.
    static Result<std::unique_ptr<Supervisor>> create(SupervisorPaths paths, DomainStore& store, Listener listener,
                                                      const std::function<void(const std::string&)>& warn);
    ~Supervisor();  // stops the watcher; the vmm processes run on for the next vmmd
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    // Starts the domain (running, or with every vCPU paused). It is running when this returns: its
    // QMP socket answered. A vmm that fails to start is an error with the last line of its log.
    Status start(const DomainDef& def, bool paused);
    // Starts the destination of a migration: a paused vmm waiting on `uri` (vmm's form,
    // tcp:HOST:PORT), state "paused (migration)", event STARTED MIGRATED.
    Status start_incoming(const DomainDef& def, const std::string& uri);
    // The source after a migration that completed: its vmm is asked to end, and the domain is
    // left "shut off (migrated)" (event STOPPED MIGRATED).
    Status end_migrated(const Uuid& uuid);
    // A restore: a paused vmm loading the saved guest at `uri` (file:PATH,offset=N), state
    // "paused (user)" until the daemon resumes it, event STARTED RESTORED.
    Status start_restoring(const DomainDef& def, const std::string& uri);
    // After a save: the vmm is asked to end, the domain left "shut off (saved)" (STOPPED SAVED).
    Status end_saved(const Uuid& uuid);
    // What a migration changed: the state (recorded), and the event to announce with it.
    void set_state(const Uuid& uuid, DomainState state, std::optional<LifecycleEvent> event);
    // Ends the vmm: SIGTERM, and SIGKILL after `kTermGrace` unless `graceful` (then an error if it
    // is still there). Returns once the domain is shut off.
    Status destroy(const Uuid& uuid, bool graceful);
    // Ends a vmm whose incoming migration or restore failed or was cancelled: the domain is shut
    // off (failed), as libvirt's is, not destroyed.
    Status end_failed(const Uuid& uuid);
    // Asks the vmm to end in order (QMP quit); the domain shuts off soon after, as libvirt's
    // shutdown returns before the guest is down.
    Status shutdown(const Uuid& uuid);
    Status suspend(const Uuid& uuid);
    Status resume(const Uuid& uuid);
    // One QMP command to the domain's vmm (an {"error"} answer is an Error with its desc).
    Result<Json> qmp(const Uuid& uuid, const std::string& command, const Json& args = Json::object());
    // Records where a migration of the running domain stands (kept in its run record for a
    // restarted vmmd). A destination in MigrationPhase::incoming cannot be resumed by resume().
    void set_phase(const Uuid& uuid, MigrationPhase phase);
    // The CPU time the domain's vmm has used (user and system, every thread), in ns; 0 if it
    // does not run or cannot be read.
    uint64_t cpu_time_ns(const Uuid& uuid) const;
    // The pid of a running domain's vmm (for what /proc says of it: proc_stats.h).
    std::optional<pid_t> vmm_pid(const Uuid& uuid) const;
    // The domain's vmm log (what a failure quotes the last line of).
    std::string log_path(const DomainDef& def) const;
    // Waits until the domain does not run (true) or `timeout` passes (false).
    bool wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout);

    // Tells the listener of an event that changes no run state (a migration's define or undefine).
    void announce(const DomainDef& def, int id, LifecycleEvent e) const {
        if (listener_) listener_(def, id, e);
    }

    static constexpr std::chrono::seconds kTermGrace{10};
    static constexpr std::chrono::seconds kStartTimeout{30};
    // An adopted vmm's QMP socket is tried this long at a time until it answers.
    static constexpr std::chrono::seconds kAdoptAttempt{2};

private:
    // Why vmmd expects the process to end: it decides the state the domain is left in.
    enum class Intent { none, shutdown, destroy, migrated, saved, failed };
    struct Running {
        DomainDef def;
        int id = -1;
        std::unique_ptr<VmmProcess> process;
        std::mutex qmp_mutex;  // one command at a time on the socket
        std::unique_ptr<vmm::monitor::QmpClient> qmp;  // null while an adopted vmm has not answered
        // An adopted vmm's first connection attempt: answered (qmp set) or failed (silent). A call
        // made meanwhile waits for it, as libvirt's calls wait for its reconnection to a domain.
        std::condition_variable qmp_settled;
        bool silent = false;  // under qmp_mutex
        std::atomic<Intent> intent{Intent::none};
        std::atomic<MigrationPhase> phase{MigrationPhase::none};
    };

    Supervisor(SupervisorPaths paths, DomainStore& store, Listener listener, UniqueFd wake);
    // Starts a vmm for `def` (a boot, or an incoming migration or a restore on `incoming`), puts
    // it under watch in `state` and `phase`, and returns its domain id.
    Result<int> launch(const DomainDef& def, bool paused, const std::string& incoming, DomainState state,
                       MigrationPhase phase = MigrationPhase::none);
    // Marks `def` as starting, or says why it cannot start: it runs or starts already, or a run
    // record nobody adopted is there.
    std::optional<std::string> reserve_start(const DomainDef& def);
    std::string run_path(const Uuid& uuid, const char* suffix) const;
    std::shared_ptr<Running> find(const Uuid& uuid) const;
    // SIGTERM, then (unless graceful) SIGKILL after kTermGrace; `why` decides the state left.
    Status stop_process(const Uuid& uuid, bool graceful, Intent why);
    Result<std::unique_ptr<vmm::monitor::QmpClient>> connect_qmp(const VmmProcess& p, const std::string& socket,
                                                                 const std::string& log, off_t log_from) const;
    // Puts a started (or adopted) process under watch; the store learns that it runs.
    void watch(std::shared_ptr<Running> r, DomainState state);
    // Writes (or rewrites) the domain's run record.
    Status record(const Running& r, DomainState state) const;
    Result<Json> call(Running& r, const std::string& command, const Json& args);
    Status change_run_state(const Uuid& uuid, bool pause);
    // QMP quit, expecting the vmm to end for `why` (shutdown, or the end of a migration).
    Status quit(const Uuid& uuid, Intent why);
    // Adoption (supervisor_adopt.cc).
    void adopt_all(const std::function<void(const std::string&)>& warn);
    // A record that does not read: the vmm behind the domain's QMP socket, with its stored definition.
    Status adopt_unreadable(const std::string& record_path, const vmm::Error& why);
    Status adopt_process(const DomainDef& def, int id, DomainState state, MigrationPhase phase, ProcessIdentity who);
    // The adopted vmm's thread: reaches its QMP socket, then settles it.
    void attach(const std::shared_ptr<Running>& r, DomainState recorded);
    void settle(const std::shared_ptr<Running>& r, DomainState recorded);
    bool stopping() const;
    void watch_loop();
    void ended(const std::shared_ptr<Running>& r);
    void wake() const;
    SupervisorPaths paths_;
    DomainStore& store_;
    Listener listener_;
    UniqueFd wake_;  // eventfd: the watcher re-reads the set of processes, or stops
    mutable std::mutex mutex_;
    std::condition_variable stopped_;
    std::map<Uuid, std::shared_ptr<Running>> running_;
    std::map<Uuid, bool> starting_;  // start() in progress: a second start is refused
    int next_id_ = 1;
    bool stopping_ = false;
    std::condition_variable stopping_cv_;  // an adopter's wait between attempts ends when vmmd stops
    std::thread watcher_;
    std::vector<std::thread> adopters_;  // joined first, in the destructor
};

}  // namespace vmmd
