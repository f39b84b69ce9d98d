#include "vmmd/runtime/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <signal.h>
#include <sys/eventfd.h>
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

Result<std::unique_ptr<Supervisor>> Supervisor::create(SupervisorPaths paths, DomainStore& store, Listener listener,
                                                       const std::function<void(const std::string&)>& warn) {
    for (const char* sub : {"", "/run", "/log"})
        if (auto made = make_private_directory(paths.state_dir + sub); !made) return made.error();
    UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake.valid()) return Error::from_errno("eventfd");
    std::unique_ptr<Supervisor> s(new Supervisor(std::move(paths), store, std::move(listener), std::move(wake)));
    s->watcher_ = std::thread([p = s.get()] { p->watch_loop(); });
    s->adopt_all(warn);
    return s;
}

Supervisor::Supervisor(SupervisorPaths paths, DomainStore& store, Listener listener, UniqueFd wake)
    : paths_(std::move(paths)), store_(store), listener_(std::move(listener)), wake_(std::move(wake)) {}

Supervisor::~Supervisor() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    stopping_cv_.notify_all();
    for (std::thread& t : adopters_) t.join();
    wake();
    if (watcher_.joinable()) watcher_.join();
}

bool Supervisor::stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
}

void Supervisor::wake() const {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
}

std::string Supervisor::run_path(const Uuid& uuid, const char* suffix) const {
    return paths_.state_dir + "/run/" + format_uuid(uuid) + suffix;
}

std::string Supervisor::log_path(const DomainDef& def) const { return paths_.state_dir + "/log/" + def.name + ".log"; }

std::shared_ptr<Supervisor::Running> Supervisor::find(const Uuid& uuid) const {
    std::lock_guard lock(mutex_);
    auto it = running_.find(uuid);
    return it == running_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<QmpClient>> Supervisor::connect_qmp(const VmmProcess& p, const std::string& socket,
                                                           const std::string& log, off_t log_from) const {
    auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    for (;;) {
        if (p.ended()) {
            return Error(fmt::format("vmm (pid {}) ended before its QMP socket answered: {} (log: {})", p.identity().pid,
                                     last_log_line(log, log_from), log));
        }
        auto q = QmpClient::connect(socket, std::chrono::milliseconds(100));
        if (q) return q;
        if (std::chrono::steady_clock::now() > deadline) {
            return Error(fmt::format("vmm (pid {}) did not answer on {} within {} s: {} (log: {})", p.identity().pid, socket,
                                     kStartTimeout.count(), q.error().message(), log));
        }
    }
}

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

std::optional<std::string> Supervisor::reserve_start(const DomainDef& def) {
    std::lock_guard lock(mutex_);
    if (running_.count(def.uuid) != 0 || starting_.count(def.uuid) != 0) return fmt::format("domain '{}' is already running", def.name);
    std::string record = run_path(def.uuid, ".json");
    if (::access(record.c_str(), F_OK) == 0) {
        return fmt::format("domain '{}' has a run record vmmd could not adopt ({}; its log says why): a vmm may still run "
                           "it. End that vmm if there is one, remove the file, then start the domain",
                           def.name, record);
    }
    starting_[def.uuid] = true;
    return std::nullopt;
}

Result<int> Supervisor::launch(const DomainDef& def, bool paused, const std::string& incoming, DomainState state,
                               MigrationPhase phase) {
    if (auto why = reserve_start(def)) return Error(*why);
    struct Unmark {
        Supervisor* s;
        Uuid u;
        ~Unmark() {
            std::lock_guard lock(s->mutex_);
            s->starting_.erase(u);
        }
    } unmark{this, def.uuid};
    std::string socket = run_path(def.uuid, ".qmp"), log = log_path(def);
    ::unlink(socket.c_str());  // a stale socket from a vmm that was killed
    off_t log_from = log_size(log);  // this run's lines start here
    auto p = VmmProcess::spawn(vmm_arguments(def, {paths_.vmm, socket, paused, incoming}), log, memlock_limit(def));
    if (!p) return p.error();
    auto q = connect_qmp(**p, socket, log, log_from);
    if (!q) {
        (void)(*p)->signal(SIGKILL);
        (*p)->reap();
        return q.error();
    }
    auto r = std::make_shared<Running>();
    r->def = def;
    r->process = std::move(*p);
    r->qmp = std::move(*q);
    r->phase = phase;
    {
        std::lock_guard lock(mutex_);
        r->id = next_id_++;
    }
    if (auto s = record(*r, state); !s) {
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
    watch(std::move(r), state);
    return id;
}

Status Supervisor::record(const Running& r, DomainState state) const {
    RunRecord rec{r.process->identity(), r.id, state, format_domain_xml(r.def), r.phase.load()};
    return write_file_atomically(run_path(r.def.uuid, ".json"), encode_run_record(rec));
}

void Supervisor::watch(std::shared_ptr<Running> r, DomainState state) {
    store_.set_running(r->def.uuid, r->id, state, r->def);  // before the watcher can see it end
    {
        std::lock_guard lock(mutex_);
        running_[r->def.uuid] = std::move(r);
    }
    wake();
}

bool Supervisor::wait_stopped(const Uuid& uuid, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return stopped_.wait_for(lock, timeout, [&] { return running_.count(uuid) == 0; });
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

Result<Json> Supervisor::call(Running& r, const std::string& command, const Json& args) {
    std::unique_lock lock(r.qmp_mutex);
    // Adopted a moment ago by a restarted vmmd: its first attempt to reach the vmm is under way.
    r.qmp_settled.wait_for(lock, kAdoptAttempt + std::chrono::seconds(1), [&r] { return r.qmp || r.silent; });
    if (!r.qmp) {
        return Error(fmt::format("domain '{}': its vmm (pid {}) has not answered on its QMP socket since vmmd started; "
                                 "vmmd keeps trying ('virsh destroy' ends it meanwhile)",
                                 r.def.name, r.process->identity().pid));
    }
    auto a = r.qmp->execute(command, args);
    if (!a) return Error(fmt::format("domain '{}': {}", r.def.name, a.error().message()));
    return a;
}

Result<Json> Supervisor::qmp(const Uuid& uuid, const std::string& command, const Json& args) {
    auto r = find(uuid);
    if (!r) return Error("domain is not running");
    return call(*r, command, args);
}

Status Supervisor::quit(const Uuid& uuid, Intent why) {
    auto r = find(uuid);
    if (!r) return Error("domain is not running");
    r->intent = why;
    auto a = call(*r, "quit", Json::object());
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
    if (auto a = call(*r, pause ? "stop" : "cont", Json::object()); !a) return a.error();
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
    if (auto s = record(*r, state); !s) vmm::log::warn("vmmd: domain '{}': {}", r->def.name, s.error().message());
    if (event) announce(r->def, r->id, *event);
}

void Supervisor::set_phase(const Uuid& uuid, MigrationPhase phase) {
    auto r = find(uuid);
    if (!r || r->phase == phase) return;
    r->phase = phase;
    auto now = store_.by_uuid(uuid);
    if (auto s = record(*r, now ? now->state : DomainState{}); !s) vmm::log::warn("vmmd: domain '{}': {}", r->def.name, s.error().message());
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

}  // namespace vmmd
