// Adopter (adopter.h; adoption.h decides what becomes of each vmm).
#include "vmmd/runtime/adopter.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <signal.h>
#include <stdio.h>

#include <filesystem>

#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/monitor/client/json_access.h"
#include "vmmd/domain/atomic_file.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/runtime/adoption.h"
#include "vmmd/runtime/supervisor.h"
#include "vmmd/runtime/run_record.h"

namespace vmmd {

using vmm::Error;
using vmm::monitor::QmpClient;

namespace {

struct Recorded {
    RunRecord record;
    DomainDef def;
};

Result<Recorded> read_record(const std::filesystem::path& path) {
    auto text = read_own_file(path.string());
    if (!text) return text.error();
    auto rec = decode_run_record(*text);
    if (!rec) return rec.error();
    auto def = parse_domain_xml(rec->xml, Uuid{});
    if (!def) return def.error().context("the definition in it");
    if (path.stem().string() != format_uuid(def->uuid)) {
        return Error(fmt::format("it names domain uuid {}, not the one in its file name", format_uuid(def->uuid)));
    }
    return Recorded{*rec, *def};
}

}  // namespace

void Adopter::adopt_all(const std::function<void(const std::string&)>& warn) {
    std::error_code ec;
    std::vector<std::pair<std::string, Error>> unreadable;  // adopted last: they take new domain ids
    for (const auto& entry : std::filesystem::directory_iterator(state_dir_ + "/run", ec)) {
        if (entry.path().extension() != ".json") continue;
        std::string path = entry.path().string();
        auto rec = read_record(entry.path());
        if (!rec) {
            unreadable.emplace_back(path, rec.error());
            continue;
        }
        if (!store_.by_uuid(rec->def.uuid)) {
            if (auto v = store_.add_transient(rec->def); !v) {
                warn(fmt::format("{}: {}", path, v.error().message()));
                continue;
            }
        }
        const RunRecord& r = rec->record;
        if (auto s = adopt_process(rec->def, r.id, r.state, r.phase, r.process); !s) warn(fmt::format("{}: {}", path, s.error().message()));
    }
    if (ec) warn(fmt::format("read {}/run: {}", state_dir_, ec.message()));
    for (const auto& [path, why] : unreadable)
        if (auto s = adopt_unreadable(path, why); !s) warn(fmt::format("{}: {}", path, s.error().message()));
}

Status Adopter::adopt_unreadable(const std::string& record_path, const Error& why) {
    std::string problem = "not a run record vmmd can read (" + why.message() + ")";
    auto uuid = parse_uuid(std::filesystem::path(record_path).stem().string());
    if (!uuid) return Error(problem + "; left as it is");
    std::string socket = run_file(state_dir_, *uuid, ".qmp");
    auto owner = socket_owner(socket);
    if (!owner) {
        return Error(fmt::format("{}, and no vmm answers on its QMP socket ({}): left as it is; the domain cannot "
                                 "start until it is removed",
                                 problem, owner.error().message()));
    }
    auto v = store_.by_uuid(*uuid);
    if (!v) {
        return Error(fmt::format("{}; vmm pid {} still runs the domain, but vmmd has no definition of it: left as it is. "
                                 "End that vmm, then remove the file",
                                 problem, owner->pid));
    }
    if (auto s = is_vmm_on(owner->pid, socket); !s) return s.error().context(problem + "; left as it is");
    std::string kept = record_path + ".unreadable";
    if (::rename(record_path.c_str(), kept.c_str()) != 0) return Error::from_errno(fmt::format("{}; rename it to {}", problem, kept));
    vmm::log::warn("vmmd: {}: {}; kept as {}. The vmm behind its QMP socket (pid {}) is adopted with the stored "
                   "definition of '{}'",
                   record_path, problem, kept, owner->pid, v->def.name);
    int id = vmms_.next_id();
    return adopt_process(v->def, id, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_UNKNOWN}, MigrationPhase::none, *owner);
}

Status Adopter::adopt_process(const DomainDef& def, int id, DomainState state, MigrationPhase phase, ProcessIdentity who) {
    auto process = VmmProcess::adopt(who);
    if (!process) {
        ::unlink(run_file(state_dir_, def.uuid, ".json").c_str());
        ::unlink(run_file(state_dir_, def.uuid, ".qmp").c_str());
        store_.set_stopped(def.uuid, {VIR_DOMAIN_SHUTOFF, VIR_DOMAIN_SHUTOFF_CRASHED});
        return Error(fmt::format("domain '{}' ended while vmmd was away ({}); it is shut off (crashed)", def.name,
                                 process.error().message()));
    }
    if (auto s = is_vmm_on(who.pid, run_file(state_dir_, def.uuid, ".qmp")); !s) {
        return s.error().context("the run record names another process; left as it is, and the domain cannot start "
                                 "until it is removed");
    }
    auto r = std::make_shared<RunningVmm>(def, id, std::move(*process), phase);
    vmms_.ids_above(id);
    if (auto s = r->record(run_file(state_dir_, def.uuid, ".json"), state); !s) {
        vmm::log::warn("vmmd: domain '{}': {}", def.name, s.error().message());
    }
    store_.set_running(def.uuid, id, state, def);  // before the watcher can see it end
    vmms_.add(r);
    vmm::log::info("vmmd: domain '{}' (id {}, vmm pid {}) adopted{}", def.name, id, who.pid,
                   phase == MigrationPhase::none ? "" : fmt::format(" (migration phase {})", phase_name(phase)));
    std::lock_guard lock(mutex_);
    threads_.emplace_back([this, r, state] { attach(r, state); });
    return {};
}

void Adopter::attach(const std::shared_ptr<RunningVmm>& r, DomainState recorded) {
    vmm::name_this_thread("vmmd-adopt");
    std::string socket = run_file(state_dir_, r->def.uuid, ".qmp");
    bool silent = false;
    for (;;) {
        if (vmms_.stopping() || r->process->ended()) return;
        auto q = QmpClient::connect(socket, RunningVmm::kAdoptAttempt);
        if (q) {
            r->answered(std::move(*q));
            sup_.relay_events(r);
            break;
        }
        if (!silent) {
            silent = true;
            r->went_silent();
            vmm::log::warn("vmmd: domain '{}' (vmm pid {}) does not answer on its QMP socket ({}): shown paused (unknown) "
                           "until it does; 'virsh destroy' ends it",
                           r->def.name, r->process->identity().pid, q.error().message());
            sup_.set_state(r->def.uuid, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_UNKNOWN}, std::nullopt);
        }
        vmms_.wait_or_stop(RunningVmm::kAdoptAttempt);
    }
    if (silent) vmm::log::info("vmmd: domain '{}' (vmm pid {}) answers on its QMP socket now", r->def.name, r->process->identity().pid);
    settle(r, recorded);
}

void Adopter::settle(const std::shared_ptr<RunningVmm>& r, DomainState recorded) {
    auto status = r->call("query-status");
    auto migration = r->call("query-migrate");
    if (!status || !migration) {
        vmm::log::warn("vmmd: {}", (!status ? status : migration).error().message());
        return;
    }
    Adoption a = decide_adoption(r->phase, recorded, {vmm::monitor::str(*status, "status"), vmm::monitor::str(*migration, "status")});
    std::string who = fmt::format("vmmd: domain '{}' (id {}, vmm pid {})", r->def.name, r->id, r->process->identity().pid);
    std::optional<LifecycleEvent> event;
    switch (a.action) {
        case Adoption::Action::keep:
        case Adoption::Action::hold: break;
        case Adoption::Action::end_incoming:
            vmm::log::warn("{}: {}", who, a.why);
            r->intent = RunningVmm::Intent::destroy;
            if (auto s = r->process->signal(SIGKILL); !s) vmm::log::warn("{}: {}", who, s.error().message());
            return;  // the watcher sees it end and shuts the domain off
        case Adoption::Action::cancel_outgoing:
            if (auto c = r->call("migrate-cancel"); !c) vmm::log::warn("{}: {}", who, c.error().message());
            break;
        case Adoption::Action::resume_source:
            if (auto c = r->call("cont", Json{{"force", true}}); !c) {
                vmm::log::warn("{}: {}", who, c.error().message());
                a.state = {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION};
            } else {
                event = LifecycleEvent{VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_MIGRATED};
            }
            break;
    }
    r->phase = a.phase;
    sup_.set_state(r->def.uuid, a.state, event);
    if (a.why.empty()) return;
    if (a.action == Adoption::Action::keep) vmm::log::info("{}: {}", who, a.why);
    else vmm::log::warn("{}: {}", who, a.why);
}

void Adopter::join() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mutex_);
        threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
}

}  // namespace vmmd
