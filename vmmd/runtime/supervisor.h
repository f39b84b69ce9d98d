// Supervisor: the domains that run, one vmm process each, driven over its QMP socket in
// <state>/run. It starts them (DOMAIN_CREATE), stops them (shutdown: the vmm ends in order;
// destroy: SIGTERM, then SIGKILL), pauses and resumes them, and tells the DomainStore and a
// listener (lifecycle events) what happened. One watcher thread polls every process's pidfd, so a
// vmm that dies is noticed at once: a domain nobody stopped becomes "shut off (crashed)".
//
// The processes outlive vmmd: each runs in its own session, and <state>/run/<uuid>.json records
// it (RunRecord). A restarted vmmd adopts every recorded process that still runs and marks the
// others crashed.
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

#include "vmm/monitor/client/qmp_client.h"
#include "vmmd/domain/domain_store.h"
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
    // What a migration changed: the state (recorded), and the event to announce with it.
    void set_state(const Uuid& uuid, DomainState state, std::optional<LifecycleEvent> event);
    // Ends the vmm: SIGTERM, and SIGKILL after `kTermGrace` unless `graceful` (then an error if it
    // is still there). Returns once the domain is shut off.
    Status destroy(const Uuid& uuid, bool graceful);
    // Asks the vmm to end in order (QMP quit); the domain shuts off soon after, as libvirt's
    // shutdown returns before the guest is down.
    Status shutdown(const Uuid& uuid);
    Status suspend(const Uuid& uuid);
    Status resume(const Uuid& uuid);
    // One QMP command to the domain's vmm (an {"error"} answer is an Error with its desc).
    Result<Json> qmp(const Uuid& uuid, const std::string& command, const Json& args = Json::object());
    // Waits until the domain does not run (true) or `timeout` passes (false).
    bool wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout);

    // Tells the listener of an event that changes no run state (a migration's define or undefine).
    void announce(const DomainDef& def, int id, LifecycleEvent e) const {
        if (listener_) listener_(def, id, e);
    }

    static constexpr std::chrono::seconds kTermGrace{10};
    static constexpr std::chrono::seconds kStartTimeout{30};

private:
    // Why vmmd expects the process to end: it decides the state the domain is left in.
    enum class Intent { none, shutdown, destroy, migrated };
    struct Running {
        DomainDef def;
        int id = -1;
        std::unique_ptr<VmmProcess> process;
        std::mutex qmp_mutex;  // one command at a time on the socket
        std::unique_ptr<vmm::monitor::QmpClient> qmp;
        std::atomic<Intent> intent{Intent::none};
    };

    Supervisor(SupervisorPaths paths, DomainStore& store, Listener listener, UniqueFd wake);
    // Starts a vmm for `def` (a boot, or an incoming migration on `incoming`), puts it under
    // watch in `state`, and returns its domain id.
    Result<int> launch(const DomainDef& def, bool paused, const std::string& incoming, DomainState state);
    std::string run_path(const Uuid& uuid, const char* suffix) const;
    std::string log_path(const DomainDef& def) const;
    std::shared_ptr<Running> find(const Uuid& uuid) const;
    Result<std::unique_ptr<vmm::monitor::QmpClient>> connect_qmp(const VmmProcess& p, const std::string& socket,
                                                                 const std::string& log) const;
    // Puts a started (or adopted) process under watch; the store learns that it runs.
    void watch(std::shared_ptr<Running> r, DomainState state);
    // Writes (or rewrites) the domain's run record.
    Status record(const Running& r, DomainState state) const;
    Result<Json> call(Running& r, const std::string& command, const Json& args);
    Status change_run_state(const Uuid& uuid, bool pause);
    // QMP quit, expecting the vmm to end for `why` (shutdown, or the end of a migration).
    Status quit(const Uuid& uuid, Intent why);
    void adopt_all(const std::function<void(const std::string&)>& warn);
    Status adopt(const std::string& record_path);
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
    std::thread watcher_;
};

}  // namespace vmmd
