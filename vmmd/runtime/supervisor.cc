#include "vmmd/runtime/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "vmm/common/log.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/runtime/launch.h"
#include "vmmd/runtime/log_tail.h"
#include "vmmd/runtime/proc_stats.h"
#include "vmmd/runtime/run_record.h"

namespace vmmd {

using vmm::Error;
using vmm::monitor::QmpClient;

namespace {

std::string describe(const ProcessEnding& e) {
    switch (e.kind) {
        case ProcessEnding::Kind::exited: return fmt::format("exited with status {}", e.value);
        case ProcessEnding::Kind::killed: return fmt::format("was killed by signal {}", e.value);
        case ProcessEnding::Kind::unknown: break;
    }
    return "ended (how is unknown: it was started by an earlier vmmd)";
}

}  // namespace

Result<std::unique_ptr<Supervisor>> Supervisor::create(SupervisorPaths paths, DomainStore& store, Listener listener,
                                                       MonitorListener monitor,
                                                       const std::function<void(const std::string&)>& warn) {
    for (const char* sub : {"", "/run", "/log"})
        if (auto made = make_private_directory(paths.state_dir + sub); !made) return made.error();
    std::unique_ptr<Supervisor> s(new Supervisor(std::move(paths), store, std::move(listener), std::move(monitor)));
    auto vmms = RunningVmms::create([p = s.get()](const std::shared_ptr<RunningVmm>& r) { p->ended(r); });
    if (!vmms) return vmms.error();
    s->vmms_ = std::move(*vmms);
    s->adopter_ = std::make_unique<Adopter>(s->paths_.state_dir, store, *s->vmms_, *s);
    s->adopter_->adopt_all(warn);
    return s;
}

Supervisor::Supervisor(SupervisorPaths paths, DomainStore& store, Listener listener, MonitorListener monitor)
    : paths_(std::move(paths)), store_(store), listener_(std::move(listener)), monitor_(std::move(monitor)) {}

void Supervisor::relay_events(const std::shared_ptr<RunningVmm>& r) const {
    if (!monitor_) return;
    auto events = VmmEvents::open(run_file(paths_.state_dir, r->def.uuid, ".qmp"),
                                  [listener = monitor_, def = r->def, id = r->id](const Json& e) { listener(def, id, e); });
    if (!events) {
        vmm::log::warn("vmmd: domain '{}': its vmm's events will not reach qemu-monitor-event clients: {}", r->def.name,
                       events.error().message());
        return;
    }
    r->relay_events(std::move(*events));
}

Supervisor::~Supervisor() {
    if (vmms_) vmms_->stop();  // an adopter's wait ends, and the watcher
    if (adopter_) adopter_->join();
    vmms_.reset();  // joins the watcher, whose last act may be ended()
}

std::string Supervisor::log_path(const DomainDef& def) const { return paths_.state_dir + "/log/" + def.name + ".log"; }
Status Supervisor::start(const DomainDef& def, bool paused) {
    DomainState state = paused ? DomainState{VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_USER}
                               : DomainState{VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_BOOTED};
    auto id = launch(def, paused, "", state);
    if (!id) return id.error();
    announce(def, *id, {VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_BOOTED});
    if (paused) announce(def, *id, {VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_PAUSED});
    return {};
}

Status Supervisor::start_incoming(const DomainDef& def, const std::string& uri) {
    auto id = launch(def, true, uri, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION}, MigrationPhase::incoming);
    if (!id) return id.error();
    announce(def, *id, {VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_MIGRATED});
    return {};
}

Status Supervisor::start_restoring(const DomainDef& def, const std::string& uri) {
    auto id = launch(def, true, uri, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_USER});
    if (!id) return id.error();
    announce(def, *id, {VIR_DOMAIN_EVENT_STARTED, VIR_DOMAIN_EVENT_STARTED_RESTORED});
    return {};
}

Result<int> Supervisor::launch(const DomainDef& def, bool paused, const std::string& incoming, DomainState state,
                               MigrationPhase phase) {
    if (auto why = vmms_->reserve(def, run_file(paths_.state_dir, def.uuid, ".json"))) return Error(*why);
    struct Unmark {
        RunningVmms& vmms;
        Uuid u;
        ~Unmark() { vmms.unreserve(u); }
    } unmark{*vmms_, def.uuid};
    std::string socket = run_file(paths_.state_dir, def.uuid, ".qmp"), log = log_path(def);
    ::unlink(socket.c_str());  // a stale socket from a vmm that was killed
    off_t log_from = log_size(log);  // this run's lines start here
    auto p = VmmProcess::spawn(vmm_arguments(def, {paths_.vmm, socket, paused, incoming}), log, memlock_limit(def));
    if (!p) return p.error();
    auto q = RunningVmm::connect(**p, socket, log, log_from, kStartTimeout);
    if (!q) {
        (void)(*p)->signal(SIGKILL);
        (*p)->reap();
        return q.error();
    }
    auto r = std::make_shared<RunningVmm>(def, vmms_->next_id(), std::move(*p), phase);
    r->answered(std::move(*q));
    relay_events(r);
    if (auto s = r->record(run_file(paths_.state_dir, def.uuid, ".json"), state); !s) {
        (void)r->process->signal(SIGKILL);
        r->process->reap();
        return s.error();
    }
    int id = r->id;
    std::string how = incoming.empty()                        ? "started"
                      : phase == MigrationPhase::incoming ? "waits for a migration on " + incoming
                                                          : "restores from " + incoming;
    vmm::log::info("vmmd: domain '{}' {} as id {} (vmm pid {}, log {})", def.name, how, id, r->process->identity().pid, log);
    if (std::string display = display_devices_named(def); !display.empty()) {
        vmm::log::info("vmmd: domain '{}': {} kept in its definition, not honoured: vmm has no display (the guest's "
                       "console is its serial port)", def.name, display);
    }
    store_.set_running(def.uuid, id, state, def);  // before the watcher can see it end
    vmms_->add(std::move(r));
    return id;
}
bool Supervisor::wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout) {
    return vmms_->wait_stopped(uuid, timeout);
}

Status Supervisor::destroy(const Uuid& uuid, bool graceful) { return stop_process(uuid, graceful, Intent::destroy); }
Status Supervisor::end_failed(const Uuid& uuid) { return stop_process(uuid, false, Intent::failed); }

Status Supervisor::stop_process(const Uuid& uuid, bool graceful, Intent why) {
    auto r = find(uuid);
    if (!r) return Error("domain is not running");
    r->intent = why;
    if (auto s = r->process->signal(SIGTERM); !s) return s;
    if (wait_stopped(uuid, kTermGrace)) return {};
    pid_t pid = r->process->identity().pid;
    if (graceful) {
        return Error(fmt::format("vmm (pid {}) is still running {} s after SIGTERM; DESTROY_GRACEFUL does not kill it", pid,
                                 kTermGrace.count()));
    }
    vmm::log::warn("vmmd: domain '{}': vmm (pid {}) ignored SIGTERM for {} s; killing it", r->def.name, pid, kTermGrace.count());
    if (auto s = r->process->signal(SIGKILL); !s) return s;
    if (wait_stopped(uuid, kTermGrace)) return {};
    return Error(fmt::format("vmm (pid {}) survived SIGKILL for {} s", pid, kTermGrace.count()));
}
Result<Json> Supervisor::qmp(const Uuid& uuid, const std::string& command, const Json& args) {
    auto r = find(uuid);
    if (!r) return Error("domain is not running");
    return r->call(command, args);
}

Status Supervisor::quit(const Uuid& uuid, Intent why) {
    auto r = find(uuid);
    if (!r) return Error("domain is not running");
    r->intent = why;
    auto a = r->call("quit");
    if (!a && !r->process->ended()) {  // a vmm that ends as it answers is what was asked
        r->intent = Intent::none;
        return a.error();
    }
    return {};
}

Status Supervisor::shutdown(const Uuid& uuid) { return quit(uuid, Intent::shutdown); }
Status Supervisor::end_migrated(const Uuid& uuid) { return quit(uuid, Intent::migrated); }
Status Supervisor::end_saved(const Uuid& uuid) { return quit(uuid, Intent::saved); }

Status Supervisor::change_run_state(const Uuid& uuid, bool pause) {
    auto r = find(uuid);
    if (!r) return Error("domain is not running");
    auto now = store_.by_uuid(uuid);
    bool paused = now && now->state.state == VIR_DOMAIN_PAUSED;
    if (!pause && !paused) return Error("domain is already running");
    if (!pause && r->phase == MigrationPhase::incoming) {
        return Error(fmt::format("domain '{}' is the destination of a migration whose Finish has not resumed it: resuming "
                                 "it here could run the guest twice (the source still has it)",
                                 r->def.name));
    }
    if (pause && paused) return {};  // as libvirt's QEMU driver: suspending a paused domain does nothing
    if (auto a = r->call(pause ? "stop" : "cont"); !a) return a.error();
    if (pause) {
        set_state(uuid, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_USER}, LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_PAUSED});
    } else {
        set_state(uuid, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_UNPAUSED},
                  LifecycleEvent{VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_UNPAUSED});
    }
    return {};
}

void Supervisor::set_state(const Uuid& uuid, DomainState state, std::optional<LifecycleEvent> event) {
    auto r = find(uuid);
    if (!r) return;
    store_.set_state(uuid, state);
    if (auto s = r->record(run_file(paths_.state_dir, uuid, ".json"), state); !s) vmm::log::warn("vmmd: domain '{}': {}", r->def.name, s.error().message());
    if (event) announce(r->def, r->id, *event);
}

void Supervisor::set_phase(const Uuid& uuid, MigrationPhase phase) {
    auto r = find(uuid);
    if (!r || r->phase == phase) return;
    r->phase = phase;
    auto now = store_.by_uuid(uuid);
    if (auto s = r->record(run_file(paths_.state_dir, uuid, ".json"), now ? now->state : DomainState{}); !s) vmm::log::warn("vmmd: domain '{}': {}", r->def.name, s.error().message());
}

std::optional<pid_t> Supervisor::vmm_pid(const Uuid& uuid) const {
    auto r = find(uuid);
    if (!r) return std::nullopt;
    return r->process->identity().pid;
}

uint64_t Supervisor::cpu_time_ns(const Uuid& uuid) const {
    auto pid = vmm_pid(uuid);
    auto t = pid ? read_task(*pid) : std::nullopt;
    return t ? t->user_ns + t->system_ns : 0;
}

Status Supervisor::suspend(const Uuid& uuid) { return change_run_state(uuid, true); }
Status Supervisor::resume(const Uuid& uuid) { return change_run_state(uuid, false); }

// The watcher's (RunningVmms): the vmm ended, as vmmd expected or not.
void Supervisor::ended(const std::shared_ptr<RunningVmm>& r) {
    ProcessEnding how = r->process->reap();
    Intent intent = r->intent;
    DomainState state{VIR_DOMAIN_SHUTOFF, VIR_DOMAIN_SHUTOFF_CRASHED};
    LifecycleEvent event{VIR_DOMAIN_EVENT_STOPPED, VIR_DOMAIN_EVENT_STOPPED_CRASHED};
    if (intent == Intent::migrated) {
        state.reason = VIR_DOMAIN_SHUTOFF_MIGRATED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_MIGRATED;
    } else if (intent == Intent::saved) {
        state.reason = VIR_DOMAIN_SHUTOFF_SAVED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_SAVED;
    } else if (intent == Intent::failed || (intent == Intent::none && r->phase == MigrationPhase::incoming)) {
        // An incoming migration or restore that failed, was cancelled, or whose vmm gave up.
        state.reason = VIR_DOMAIN_SHUTOFF_FAILED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_FAILED;
    } else if (intent == Intent::destroy) {
        state.reason = VIR_DOMAIN_SHUTOFF_DESTROYED;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_DESTROYED;
    } else if (intent == Intent::shutdown || (how.kind == ProcessEnding::Kind::exited && how.value == 0)) {
        // Asked to end, or the guest powered itself off (the control device's exit, status 0).
        state.reason = VIR_DOMAIN_SHUTOFF_SHUTDOWN;
        event.detail = VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN;
    }
    const Uuid& uuid = r->def.uuid;
    ::unlink(run_file(paths_.state_dir, uuid, ".json").c_str());
    ::unlink(run_file(paths_.state_dir, uuid, ".qmp").c_str());
    store_.set_stopped(uuid, state);
    vmms_->remove(r);
    bool crashed = state.reason == VIR_DOMAIN_SHUTOFF_CRASHED;
    const char* why = crashed ? "crashed" : state.reason == VIR_DOMAIN_SHUTOFF_FAILED ? "failed" : "in order";
    std::string line = fmt::format("vmmd: domain '{}' (id {}): vmm (pid {}) {}; the domain is shut off ({})", r->def.name, r->id,
                                   r->process->identity().pid, describe(how), why);
    if (crashed) vmm::log::warn("{}, see {}", line, log_path(r->def));
    else vmm::log::info("{}", line);
    announce(r->def, r->id, event);
}

}  // namespace vmmd
