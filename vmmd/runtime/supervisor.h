// Supervisor: the domains that run, one vmm process each, driven over its QMP socket in
// <state>/run. It starts them (DOMAIN_CREATE), stops them (shutdown: the vmm ends in order;
// destroy: SIGTERM, then SIGKILL), pauses and resumes them, and tells the DomainStore and a
// listener (lifecycle events) what happened. One watcher thread polls every process's pidfd, so a
// vmm that dies is noticed at once: a domain nobody stopped becomes "shut off (crashed)".
//
// The processes outlive vmmd: each runs in its own session, and <state>/run/<uuid>.json records
// it (RunRecord), with the phase of a migration it is in. A restarted vmmd adopts every recorded
// process that still runs and marks the others crashed (Adopter). The running vmms and the
// watcher are RunningVmms (running_vmm.h).
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
#include "vmmd/runtime/adopter.h"
#include "vmmd/runtime/run_record.h"
#include "vmmd/runtime/running_vmm.h"
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
    // Each QMP event of a running domain's vmm ({"event", "data", "timestamp"}, as the vmm wrote
    // it: untrusted), on a thread of that vmm's own (VmmEvents).
    using MonitorListener = std::function<void(const DomainDef& def, int id, const Json& event)>;

    // Makes run/ and log/, adopts what an earlier vmmd left running (`warn` hears about records
    // that could not be adopted), and starts the watcher.
    static Result<std::unique_ptr<Supervisor>> create(SupervisorPaths paths, DomainStore& store, Listener listener,
                                                      MonitorListener monitor,
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
    // Where a migration of the running domain stands; nullopt when it does not run.
    std::optional<MigrationPhase> phase(const Uuid& uuid) const {
        auto r = find(uuid);
        return r ? std::optional<MigrationPhase>(r->phase.load()) : std::nullopt;
    }
    // The CPU time the domain's vmm has used (user and system, every thread), in ns; 0 if it
    // does not run or cannot be read.
    uint64_t cpu_time_ns(const Uuid& uuid) const;
    // The pid of a running domain's vmm (for what /proc says of it: proc_stats.h).
    std::optional<pid_t> vmm_pid(const Uuid& uuid) const;
    // The domain's vmm log (what a failure quotes the last line of).
    std::string log_path(const DomainDef& def) const;
    // Waits until the domain does not run (true) or `timeout` passes (false).
    bool wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout);

    // From now on `r`'s QMP events go to the monitor listener (a vmm that answers on its socket);
    // one that cannot be reached for them is said in the log, and runs on unrelayed.
    void relay_events(const std::shared_ptr<RunningVmm>& r) const;

    // Tells the listener of an event that changes no run state (a migration's define or undefine).
    void announce(const DomainDef& def, int id, LifecycleEvent e) const {
        if (listener_) listener_(def, id, e);
    }

    static constexpr std::chrono::seconds kTermGrace{10};
    static constexpr std::chrono::seconds kStartTimeout{30};

private:
    using Intent = RunningVmm::Intent;

    Supervisor(SupervisorPaths paths, DomainStore& store, Listener listener, MonitorListener monitor);
    // Starts a vmm for `def` (a boot, or an incoming migration or a restore on `incoming`), puts
    // it under watch in `state` and `phase`, and returns its domain id.
    Result<int> launch(const DomainDef& def, bool paused, const std::string& incoming, DomainState state,
                       MigrationPhase phase = MigrationPhase::none);
    std::shared_ptr<RunningVmm> find(const Uuid& uuid) const { return vmms_->find(uuid); }
    // SIGTERM, then (unless graceful) SIGKILL after kTermGrace; `why` decides the state left.
    Status stop_process(const Uuid& uuid, bool graceful, Intent why);
    Status change_run_state(const Uuid& uuid, bool pause);
    // QMP quit, expecting the vmm to end for `why` (shutdown, or the end of a migration).
    Status quit(const Uuid& uuid, Intent why);
    // The watcher saw `r` end: the domain is shut off, with the reason its intent and its end give.
    void ended(const std::shared_ptr<RunningVmm>& r);

    SupervisorPaths paths_;
    DomainStore& store_;
    Listener listener_;
    MonitorListener monitor_;
    std::unique_ptr<RunningVmms> vmms_;  // the watcher's thread: stopped in ~Supervisor before the rest goes
    std::unique_ptr<Adopter> adopter_;   // its threads: joined first
};

}  // namespace vmmd
