// PostcopyRecovery (postcopy_recovery.h).
#include "vmmd/migration/postcopy_recovery.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <condition_variable>

#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"
#include "vmmd/migration/cookie.h"
#include "vmmd/migration/step_replies.h"
#include "vmmd/domain/domain_xml.h"

namespace vmmd {

using rpc::Reply;
using vmm::Error;
using vmm::monitor::Json;
using xdr::Writer;

namespace {

constexpr std::chrono::milliseconds kWatchInterval{200};
constexpr const char* kPaused = "postcopy-paused";

Reply not_paused(const std::string& name, const std::string& status) {
    return rpc::fail(VIR_ERR_OPERATION_INVALID,
                     fmt::format("migration of domain '{}' is not paused in post-copy (its vmm reports '{}'): "
                                 "there is nothing to resume",
                                 name, status));
}

// A domain in postcopy as libvirt says it: running or paused, "post-copy" or "post-copy failed".
DomainState postcopy_state(int state, bool failed) {
    if (state == VIR_DOMAIN_PAUSED) return {state, failed ? VIR_DOMAIN_PAUSED_POSTCOPY_FAILED : VIR_DOMAIN_PAUSED_POSTCOPY};
    return {VIR_DOMAIN_RUNNING, failed ? VIR_DOMAIN_RUNNING_POSTCOPY_FAILED : VIR_DOMAIN_RUNNING_POSTCOPY};
}

}  // namespace
void PostcopyRecovery::failed_here(const Uuid& uuid) {
    MigrationJob job = jobs_.get(uuid);
    job.operation = VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT;
    job.active = job.postcopy = job.postcopy_failed = true;
    jobs_.set(uuid, job);
    sup_.set_state(uuid, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_POSTCOPY_FAILED},
                   LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY_FAILED});
}

// Begin3 with VIR_MIGRATE_POSTCOPY_RESUME: the source's migration must be paused in postcopy.
Reply PostcopyRecovery::begin(const DomainView& v, uint32_t flags) {
    if ((flags & VIR_MIGRATE_POSTCOPY) == 0) {
        return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED, "resuming failed post-copy migration requires post-copy to be enabled");
    }
    if (!v.active()) return not_running(v);
    auto status = driver_.status(v.def.uuid);
    if (!status) return rpc::fail(VIR_ERR_OPERATION_FAILED, status.error().message());
    if (*status != kPaused) return not_paused(v.def.name, *status);
    MigrationJob job = jobs_.get(v.def.uuid);
    job.operation = VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT;
    job.active = job.postcopy = true;  // as it was before (a vmmd restarted since may have lost it)
    jobs_.set(v.def.uuid, job);
    Writer w;
    w.opaque(encode_cookie({hostname_, v.def.name, v.def.uuid, std::nullopt}));
    w.string(format_domain_xml(v.def));
    return rpc::ok(std::move(w));
}

// Prepare3 with VIR_MIGRATE_POSTCOPY_RESUME: the domain runs here already, its vmm paused in
// postcopy; it listens again (migrate_recover) where the source will connect.
Reply PostcopyRecovery::prepare(const DomainDef& def, const std::vector<rpc::TypedParam>& params) {
    auto v = store_.by_uuid(def.uuid);
    if (!v || !v->active()) return no_domain(fmt::format("no domain '{}' runs here to resume its migration", def.name));
    auto status = driver_.status(def.uuid);
    if (!status) return rpc::fail(VIR_ERR_OPERATION_FAILED, status.error().message());
    if (*status != kPaused) return not_paused(def.name, *status);
    auto where = addresses_.choose(def.uuid, params);
    if (!where) return rpc::fail(VIR_ERR_INVALID_ARG, where.error().message());
    if (auto r = sup_.qmp(def.uuid, "migrate-recover", Json{{"uri", vmm_uri(where->listen)}}); !r) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED, r.error().message());
    }
    jobs_.set(def.uuid, {VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN, true, false, std::nullopt, true, true});
    return prepared_reply(hostname_, v->def, where->told);
}

// Perform3 with VIR_MIGRATE_POSTCOPY_RESUME: 'migrate -r' to the listening destination, until
// postcopy runs again (or ends). Capabilities stay as they were; the speeds may change.
vmm::Result<JobStats> PostcopyRecovery::perform(const DomainView& v, const MigrationUri& uri,
                                                const std::vector<rpc::TypedParam>& params) {
    auto settings = driver_.parameters(v, uri, VIR_MIGRATE_POSTCOPY, params);
    if (!settings) return settings.error();
    Json speeds = Json::object();
    for (const char* name : {"max-bandwidth", "max-postcopy-bandwidth"})
        if (settings->contains(name)) speeds[name] = (*settings)[name];
    if (!speeds.empty()) {
        if (auto r = sup_.qmp(v.def.uuid, "migrate-set-parameters", speeds); !r) return r.error();
    }
    if (auto r = sup_.qmp(v.def.uuid, "migrate", Json{{"uri", vmm_uri(uri)}, {"resume", true}}); !r) return r.error();
    MigrationJob job = jobs_.get(v.def.uuid);
    job.postcopy_failed = false;
    jobs_.set(v.def.uuid, job);
    return driver_.await_end(v.def.uuid, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, std::nullopt, true);
}

// Finish3 with VIR_MIGRATE_POSTCOPY_RESUME: the guest runs here throughout; this waits for the
// last page, as libvirt's QEMU driver does.
Reply PostcopyRecovery::finish(const DomainView& v, int32_t cancelled) {
    auto still_failed = [&](const std::string& why) {
        if (driver_.in_postcopy(v.def.uuid)) {
            jobs_.set(v.def.uuid, {VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN, true, false, std::nullopt, true, true});
            sup_.set_state(v.def.uuid, postcopy_state(v.state.state, true), std::nullopt);
        }
        return rpc::fail(VIR_ERR_OPERATION_FAILED, why);
    };
    if (cancelled != 0) return still_failed(fmt::format("the recovery of domain '{}' was cancelled", v.def.name));
    auto done = driver_.await_end(v.def.uuid, VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN, std::nullopt);
    if (!done) return still_failed("incoming: " + done.error().message());
    if (v.state.state == VIR_DOMAIN_RUNNING) {
        // Running as this side says it: make sure its vmm runs the guest too (a first Finish
        // that the broken link cut short may never have sent 'cont'; a second one is harmless).
        if (auto c = sup_.qmp(v.def.uuid, "cont"); !c) return still_failed("incoming: " + c.error().message());
        sup_.set_state(v.def.uuid, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATED}, std::nullopt);
    }
    MigrationJob job = jobs_.get(v.def.uuid);
    job.postcopy = job.postcopy_failed = false;
    jobs_.set(v.def.uuid, job);
    driver_.job_completed(v.def.uuid, *done);  // unless the watcher saw the end first
    return finished_reply(hostname_, store_, v.def.uuid);
}

// domjobabort --postcopy (VIR_DOMAIN_ABORT_JOB_POSTCOPY): pauses an outgoing postcopy.
Reply PostcopyRecovery::pause(const DomainView& v) {
    MigrationJob job = jobs_.get(v.def.uuid);
    auto status = v.active() ? driver_.status(v.def.uuid) : vmm::Result<std::string>(std::string("none"));
    if (!status) return rpc::fail(VIR_ERR_OPERATION_FAILED, status.error().message());
    if (!job.active || job.operation != VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT || *status != "postcopy-active") {
        return rpc::fail(VIR_ERR_OPERATION_INVALID,
                         fmt::format("current job is not outgoing migration in post-copy mode (its vmm reports '{}')", *status));
    }
    if (auto r = sup_.qmp(v.def.uuid, "migrate-pause"); !r) return rpc::fail(VIR_ERR_OPERATION_FAILED, r.error().message());
    return rpc::ok();
}
void PostcopyRecovery::watch(const Uuid& uuid) {
    std::jthread old;
    {
        std::lock_guard lock(watch_mutex_);
        auto& slot = watches_[uuid];
        old = std::move(slot);
        slot = std::jthread([this, uuid](std::stop_token stop) { watch_loop(stop, uuid); });
    }
    // `old` is stopped and joined here, outside the lock.
}

void PostcopyRecovery::watch_loop(std::stop_token stop, Uuid uuid) {
    std::mutex m;
    std::condition_variable_any tick;
    bool failed = false;
    for (;;) {
        std::unique_lock lock(m);
        if (tick.wait_for(lock, stop, kWatchInterval, [] { return false; }) || stop.stop_requested()) return;
        auto status = driver_.status(uuid);
        auto v = store_.by_uuid(uuid);
        if (!status || !v || !v->active()) return;
        if (*status == "completed") {
            if (v->state.state == VIR_DOMAIN_RUNNING) {
                sup_.set_state(uuid, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATED}, std::nullopt);  // every page is here
            }
            driver_.incoming_completed(uuid);
        }
        if (*status == "completed" || *status == "failed" || *status == "cancelled" || *status == "none") return;
        bool paused = *status == kPaused;
        if (paused == failed) continue;
        failed = paused;
        bool running = v->state.state == VIR_DOMAIN_RUNNING;
        if (failed) {
            vmm::log::warn("vmmd: the incoming postcopy of domain '{}' paused: its link failed; "
                           "'virsh migrate --postcopy --postcopy-resume' on the source resumes it",
                           v->def.name);
            jobs_.set(uuid, {VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN, true, false, std::nullopt, true, true});
            sup_.set_state(uuid, postcopy_state(v->state.state, true),
                           running ? std::optional(LifecycleEvent{VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_POSTCOPY_FAILED})
                                   : std::optional(LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY_FAILED}));
        } else {  // recovered (here through libvirt, or through the vmm's own monitors)
            sup_.set_state(uuid, postcopy_state(v->state.state, false), std::nullopt);
        }
    }
}

}  // namespace vmmd
