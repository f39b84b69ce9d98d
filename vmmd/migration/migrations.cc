#include "vmmd/migration/migrations.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>


#include "vmm/common/fd.h"
#include "vmm/common/log.h"
#include "vmmd/domain/domain_args.h"
#include "vmmd/domain/domain_xml.h"
#include "vmmd/migration/legacy_steps.h"
#include "vmmd/migration/step_replies.h"

namespace vmmd {

using rpc::Proc;
using rpc::Reply;
using vmm::Error;
using xdr::Reader;
using xdr::Writer;

namespace {


// How long Finish waits for the incoming vmm to report the end of a migration its source finished.
constexpr std::chrono::seconds kFinishTimeout{60};

Reply refuse(int code, const std::string& why) { return rpc::fail(code, why); }

Reply hard_limit_refusal() {
    return refuse(VIR_ERR_OPERATION_INVALID, "cannot start RDMA migration with no memory hard limit set");
}

}  // namespace

Reply Migrations::begin(uint64_t connection, const DomainView& v, Reader& a) {
    auto params = rpc::decode_typed_params(a);
    auto flags = a.u32();
    if (!params || !flags) return undecodable("DOMAIN_MIGRATE_BEGIN3_PARAMS");
    if ((*flags & VIR_MIGRATE_POSTCOPY_RESUME) != 0) return recovery_.begin(v, *flags);
    if (!v.active()) return not_running(v);
    if (Job job = jobs_.get(v.def.uuid); job.active) {
        return refuse(VIR_ERR_OPERATION_INVALID, job.postcopy_failed ? "the domain's migration failed in post-copy and waits for "
                                                                       "'virsh migrate --postcopy --postcopy-resume'"
                                                                     : "another migration job is already running");
    }
    auto uri_text = rpc::string_param(*params, VIR_MIGRATE_PARAM_URI);
    if (!uri_text) return refuse(VIR_ERR_INVALID_ARG, uri_text.error().message());
    bool rdma = (*flags & VIR_MIGRATE_RDMA_PIN_ALL) != 0 || (*uri_text && (**uri_text).rfind("rdma", 0) == 0);
    if (rdma && !v.def.hard_limit_kib) return hard_limit_refusal();
    if ((*flags & VIR_MIGRATE_CHANGE_PROTECTION) != 0) {
        std::lock_guard lock(mutex_);
        protected_by_[v.def.uuid] = connection;
    }
    Writer w;
    w.opaque(encode_cookie({hostname_, v.def.name, v.def.uuid, std::nullopt}));
    w.string(format_domain_xml(v.def));
    return rpc::ok(std::move(w));
}
// The capabilities the incoming vmm needs before it listens (as QEMU): --postcopy's
// postcopy-ram (its listener grants the postcopy channel) and, over rdma, --rdma-pin-all's
// rdma-pin-all (as libvirt sets it at both ends; vmm's destination then pins its RAM while it
// waits for the source). With any, it starts deferred, gets them, then listens.
vmm::Status Migrations::start_incoming(const DomainDef& def, const MigrationUri& uri, uint32_t flags) {
    Json caps = Json::array();
    if ((flags & VIR_MIGRATE_POSTCOPY) != 0) caps.push_back(Json{{"capability", "postcopy-ram"}, {"state", true}});
    if (uri.rdma() && (flags & VIR_MIGRATE_RDMA_PIN_ALL) != 0) caps.push_back(Json{{"capability", "rdma-pin-all"}, {"state", true}});
    if (caps.empty()) return sup_.start_incoming(def, vmm_uri(uri));
    if (auto s = sup_.start_incoming(def, "defer"); !s) return s;
    auto r = sup_.qmp(def.uuid, "migrate-set-capabilities", Json{{"capabilities", caps}});
    if (r) r = sup_.qmp(def.uuid, "migrate-incoming", Json{{"uri", vmm_uri(uri)}});
    if (r) return {};
    (void)sup_.end_failed(def.uuid);
    return r.error();
}

// An incoming domain this vmmd did not prepare (a restarted vmmd adopted it) is ended by its
// adopter, which may still be at it when the client's next try comes, moments after the last
// failed: the next Prepare waits for that (at most kSettleWait), as libvirt's calls wait for a
// domain its restarted daemon is reconnecting. Returns whether it waited.
bool Migrations::settling_incoming(const Uuid& uuid) {
    constexpr auto kSettleWait = std::chrono::seconds(10);
    {
        std::lock_guard lock(mutex_);
        if (prepared_by_.count(uuid) != 0) return false;  // an incoming of this vmmd's, under way
    }
    if (sup_.phase(uuid) != MigrationPhase::incoming) return false;
    (void)sup_.wait_stopped(uuid, kSettleWait);
    return true;
}

Reply Migrations::prepare(uint64_t connection, Reader& a) {
    auto params = rpc::decode_typed_params(a);
    auto cookie_bytes = a.opaque(kMaxCookie);
    auto flags = a.u32();
    if (!params || !cookie_bytes || !flags) return undecodable("DOMAIN_MIGRATE_PREPARE3_PARAMS");
    auto cookie = decode_cookie(*cookie_bytes);
    if (!cookie) return refuse(VIR_ERR_INVALID_ARG, cookie.error().message());
    auto xml = rpc::string_param(*params, VIR_MIGRATE_PARAM_DEST_XML);
    auto dname = rpc::string_param(*params, VIR_MIGRATE_PARAM_DEST_NAME);
    if (!xml || !dname) return refuse(VIR_ERR_INVALID_ARG, (!xml ? xml.error() : dname.error()).message());
    if (!*xml) return refuse(VIR_ERR_INVALID_ARG, "DOMAIN_MIGRATE_PREPARE3_PARAMS: no destination_xml");
    auto def = parse_domain_xml(**xml, Uuid{});
    if (!def) return refuse(VIR_ERR_XML_ERROR, def.error().message());
    if (*dname) def->name = **dname;
    if ((*flags & VIR_MIGRATE_POSTCOPY_RESUME) != 0) return recovery_.prepare(*def, *params);
    if (auto why = driver_.tls_refusal(*flags)) return refuse(VIR_ERR_ARGUMENT_UNSUPPORTED, *why);
    auto existing = store_.by_uuid(def->uuid);
    if (existing && existing->active() && settling_incoming(def->uuid)) existing = store_.by_uuid(def->uuid);
    if (existing && existing->active()) {
        return refuse(VIR_ERR_OPERATION_INVALID, fmt::format("domain '{}' is already running here", existing->def.name));
    }
    auto where = addresses_.choose(def->uuid, *params);
    if (!where) return refuse(VIR_ERR_INVALID_ARG, where.error().message());
    const MigrationUri* uri = &where->listen;
    struct Release {  // the port is held until Finish, or given back here if Prepare fails
        Migrations* m;
        Uuid u;
        bool keep = false;
        ~Release() {
            if (!keep) m->addresses_.release(u);
        }
    } release{this, def->uuid};
    if ((uri->rdma() || (*flags & VIR_MIGRATE_RDMA_PIN_ALL) != 0) && !def->hard_limit_kib) return hard_limit_refusal();
    if (!existing) {
        if (auto t = store_.add_transient(*def); !t) return refuse(VIR_ERR_OPERATION_FAILED, t.error().message());
    }
    bool postcopy = (*flags & VIR_MIGRATE_POSTCOPY) != 0;
    if (auto s = start_incoming(*def, *uri, *flags); !s) {
        if (!existing) store_.set_stopped(def->uuid, {});  // forget the transient placeholder
        return refuse(VIR_ERR_OPERATION_FAILED, s.error().message());
    }
    // The incoming vmm reads its settings when the source connects, after this answer.
    // A fallback way (the URI's ?fallback=): listened on too once the precopy began.
    Json settings{{"tls-creds", (*flags & VIR_MIGRATE_TLS) != 0 ? driver_.tls_dir() : ""},
                  {"x-fallback-uri", vmm_fallback_uri(*uri)}};
    if (auto r = sup_.qmp(def->uuid, "migrate-set-parameters", settings); !r) {
        return refuse(VIR_ERR_OPERATION_FAILED, r.error().message());
    }
    jobs_.set(def->uuid, {VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN, true, false, std::nullopt, postcopy});
    {
        std::lock_guard lock(mutex_);
        prepared_by_[def->uuid] = connection;
    }
    release.keep = true;
    return prepared_reply(hostname_, *def, where->told);
}
// The incoming domain a Finish3 names: by the destination XML (what the _PARAMS step sends), or
// by name alone (the older FINISH3 has only dname).
std::variant<DomainDef, Reply> Migrations::finishing(const std::vector<rpc::TypedParam>& params) {
    auto xml = rpc::string_param(params, VIR_MIGRATE_PARAM_DEST_XML);
    auto name = rpc::string_param(params, VIR_MIGRATE_PARAM_DEST_NAME);
    if (!xml || !name) return refuse(VIR_ERR_INVALID_ARG, (!xml ? xml : name).error().message());
    if (*xml && !(*xml)->empty()) {
        auto def = parse_domain_xml(**xml, Uuid{});
        if (!def) return refuse(VIR_ERR_XML_ERROR, def.error().message());
        return std::move(*def);
    }
    if (!*name || (*name)->empty()) return refuse(VIR_ERR_INVALID_ARG, "DOMAIN_MIGRATE_FINISH3: no destination_xml and no dname");
    auto v = store_.by_name(**name);
    if (!v) return no_domain(fmt::format("no incoming domain '{}' (did its vmm end?)", **name));
    return v->def;
}

Reply Migrations::finish(Reader& a) {
    auto params = rpc::decode_typed_params(a);
    auto cookie_bytes = a.opaque(kMaxCookie);
    auto flags = a.u32();
    auto cancelled = a.i32();
    if (!params || !cookie_bytes || !flags || !cancelled) return undecodable("DOMAIN_MIGRATE_FINISH3_PARAMS");
    auto cookie = decode_cookie(*cookie_bytes);
    if (!cookie) return refuse(VIR_ERR_INVALID_ARG, cookie.error().message());
    auto found = finishing(*params);
    if (auto* refused = std::get_if<Reply>(&found)) return std::move(*refused);
    const DomainDef& def = std::get<DomainDef>(found);
    const Uuid uuid = def.uuid;
    auto v = store_.by_uuid(uuid);
    if (!v || !v->active()) return no_domain(fmt::format("no incoming domain '{}' (did its vmm end?)", def.name));
    addresses_.release(uuid);  // the vmm has its connection: the port may go to the next Prepare
    if ((*flags & VIR_MIGRATE_POSTCOPY_RESUME) != 0) return recovery_.finish(*v, *cancelled);
    {
        std::lock_guard lock(mutex_);
        prepared_by_.erase(uuid);  // Finish decides now, whichever connection it came on
    }
    auto fail = [&](const std::string& why) { return finish_failed(uuid, *flags, why); };
    if (*cancelled != 0) return fail(fmt::format("migration of domain '{}' was cancelled", v->def.name));
    // The source is done (or, in postcopy, has switched: the pages follow while the guest runs
    // here); the incoming vmm finishes loading the last state.
    bool postcopy = jobs_.get(uuid).postcopy;
    auto arrived = driver_.await_end(uuid, VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN,
                             std::chrono::steady_clock::now() + kFinishTimeout, postcopy);
    if (!arrived) return fail("incoming: " + arrived.error().message());
    bool paused = (*flags & VIR_MIGRATE_PAUSED) != 0;
    if (!paused) {
        if (auto c = sup_.qmp(uuid, "cont"); !c) return fail(c.error().message());
    }
    sup_.set_phase(uuid, MigrationPhase::none);  // the guest is this host's now
    if (!paused) {
        sup_.set_state(uuid, {VIR_DOMAIN_RUNNING, postcopy ? VIR_DOMAIN_RUNNING_POSTCOPY : VIR_DOMAIN_RUNNING_MIGRATED},
                       LifecycleEvent{VIR_DOMAIN_EVENT_RESUMED,
                                      postcopy ? VIR_DOMAIN_EVENT_RESUMED_POSTCOPY : VIR_DOMAIN_EVENT_RESUMED_MIGRATED});
    } else {
        sup_.set_state(uuid, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_USER},
                       LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_PAUSED});
    }
    if ((*flags & VIR_MIGRATE_PERSIST_DEST) != 0) {
        bool existed = v->persistent;
        if (auto d = store_.define(v->def); !d) {
            vmm::log::warn("vmmd: domain '{}' runs here but was not made persistent: {}", v->def.name, d.error().message());
        } else {
            sup_.announce(v->def, v->id, {VIR_DOMAIN_EVENT_DEFINED, existed ? VIR_DOMAIN_EVENT_DEFINED_UPDATED : VIR_DOMAIN_EVENT_DEFINED_ADDED});
        }
    }
    std::optional<JobStats> completed;
    if (*cookie && (*cookie)->stats) {
        completed = (*cookie)->stats;
        completed->operation = VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN;
    }
    jobs_.set(uuid, {VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN, false, false, completed, false});
    if (postcopy) recovery_.watch(uuid);  // the pages follow: a link failure (and the end) is seen there
    else if (completed) driver_.job_completed(uuid, *completed);
    return finished_reply(hostname_, store_, uuid);
}

Reply Migrations::finish_failed(const Uuid& uuid, uint32_t flags, const std::string& why) {
    jobs_.set(uuid, {});
    if (driver_.in_postcopy(uuid)) {
        // The guest runs here and only here has its newest state: it must never be destroyed.
        // Announced as libvirt's QEMU driver does (a link that broke before Finish looked). The
        // incoming vmm was started with -S and waits for the 'cont' this Finish would have sent:
        // without it the domain would say running while its vCPUs stay stopped (a link cut at
        // the very start of postcopy, before Finish, left it so).
        if ((flags & VIR_MIGRATE_PAUSED) == 0) (void)sup_.qmp(uuid, "cont");
        sup_.set_phase(uuid, MigrationPhase::none);
        sup_.set_state(uuid, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_POSTCOPY_FAILED},
                       LifecycleEvent{VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_POSTCOPY_FAILED});
    } else {
        (void)sup_.end_failed(uuid);  // nothing of the guest is left here: shut off (failed), as libvirt's
    }
    return refuse(VIR_ERR_OPERATION_FAILED, why);
}
Reply Migrations::confirm(const DomainView& v, Reader& a) {
    auto params = rpc::decode_typed_params(a);
    auto cookie_bytes = a.opaque(kMaxCookie);
    auto flags = a.u32();
    auto cancelled = a.i32();
    if (!params || !cookie_bytes || !flags || !cancelled) return undecodable("DOMAIN_MIGRATE_CONFIRM3_PARAMS");
    end_protection(v.def.uuid);  // the last step: it may undefine the source (a postcopy's job still holds it meanwhile)
    if (auto cookie = decode_cookie(*cookie_bytes); !cookie) return refuse(VIR_ERR_INVALID_ARG, cookie.error().message());
    if (!v.active()) return not_running(v);
    Job job = jobs_.get(v.def.uuid);
    if (job.postcopy && *cancelled == 0) {
        // Perform ended at the switch: the guest runs on the destination, and its last pages go
        // from here. Paused for a recovery, the guest is split: this copy must stay (paused).
        auto done = driver_.await_end(v.def.uuid, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, std::nullopt);
        if (!done) {
            if (driver_.in_postcopy(v.def.uuid)) recovery_.failed_here(v.def.uuid);  // kept for --postcopy-resume
            return refuse(VIR_ERR_OPERATION_FAILED, done.error().message());
        }
        job.completed = *done;
        job.active = false;
        jobs_.set(v.def.uuid, job);
    }
    if (*cancelled != 0 && driver_.in_postcopy(v.def.uuid)) {
        recovery_.failed_here(v.def.uuid);
        return refuse(VIR_ERR_OPERATION_FAILED, "the migration failed in postcopy: the guest runs on the destination; "
                                                "this copy stays paused (resuming it would fork the guest)");
    }
    if (*cancelled != 0) return confirm_cancelled(v, job);
    if (job.completed) driver_.job_completed(v.def.uuid, *job.completed);  // before the domain stops here, as libvirt's
    if (auto s = sup_.end_migrated(v.def.uuid); !s) return refuse(VIR_ERR_OPERATION_FAILED, s.error().message());
    sup_.wait_stopped(v.def.uuid, Supervisor::kTermGrace);
    if ((*flags & VIR_MIGRATE_UNDEFINE_SOURCE) != 0 && v.persistent) {
        if (auto s = store_.undefine(v.def.uuid); !s) return refuse(VIR_ERR_OPERATION_FAILED, s.error().message());
        sup_.announce(v.def, -1, {VIR_DOMAIN_EVENT_UNDEFINED, VIR_DOMAIN_EVENT_UNDEFINED_REMOVED});
    }
    return rpc::ok();
}

// Confirm with 'cancelled': the destination did not finish, so the guest stays here. vmm kept it
// through the failure; undo the pause a non-live migration made, and say it runs again. A
// migration that completed here but failed at Finish leaves the vmm 'postmigrate', which refuses
// a plain 'cont': the client's word that the destination did not finish (it ends its copy, now or
// when its vmmd restarts) is what forces it.
Reply Migrations::confirm_cancelled(const DomainView& v, Job job) {
    if (job.paused_for_it || v.state.state == VIR_DOMAIN_PAUSED) {
        if (auto c = sup_.qmp(v.def.uuid, "cont", Json{{"force", true}}); !c) {
            vmm::log::warn("vmmd: domain '{}': the client cancelled its migration, and resuming it here failed: {}; it "
                           "stays paused ('virsh resume' retries)",
                           v.def.name, c.error().message());
            return refuse(VIR_ERR_OPERATION_FAILED, c.error().message());
        }
    }
    sup_.set_phase(v.def.uuid, MigrationPhase::none);
    sup_.set_state(v.def.uuid, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATION_CANCELED},
                   LifecycleEvent{VIR_DOMAIN_EVENT_RESUMED, VIR_DOMAIN_EVENT_RESUMED_MIGRATED});
    job.active = false;
    jobs_.set(v.def.uuid, job);
    vmm::log::info("vmmd: domain '{}': the client cancelled its migration (Confirm): the guest runs here", v.def.name);
    return rpc::ok();
}

void Migrations::connection_closed(uint64_t connection) {
    std::vector<Uuid> orphans;
    {
        std::lock_guard lock(mutex_);
        std::erase_if(protected_by_, [connection](const auto& p) { return p.second == connection; });
        for (auto it = prepared_by_.begin(); it != prepared_by_.end();) {
            if (it->second != connection) {
                ++it;
                continue;
            }
            orphans.push_back(it->first);
            it = prepared_by_.erase(it);
        }
    }
    for (const Uuid& uuid : orphans) {
        addresses_.release(uuid);
        auto v = store_.by_uuid(uuid);
        if (!v || !v->active() || jobs_.get(uuid).operation != VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN || driver_.in_postcopy(uuid)) continue;
        vmm::log::warn("vmmd: domain '{}': the client that prepared its incoming migration closed its connection before "
                       "Finish: its vmm is ended, as libvirt's QEMU driver ends one (the source keeps the guest)",
                       v->def.name);
        jobs_.set(uuid, {});
        if (auto s = sup_.end_failed(uuid); !s) vmm::log::warn("vmmd: domain '{}': {}", v->def.name, s.error().message());
    }
}

std::optional<std::string> Migrations::change_refusal(const Uuid& uuid) {
    Job job = jobs_.get(uuid);
    bool held = job.active && job.protect && job.operation == VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT;
    if (!held) {
        std::lock_guard lock(mutex_);
        held = protected_by_.count(uuid) != 0;
    }
    if (!held) return std::nullopt;
    return "the domain is migrating with change protection: its definition cannot change until the migration ends";
}

void Migrations::end_protection(const Uuid& uuid) {
    std::lock_guard lock(mutex_);
    protected_by_.erase(uuid);
}

std::vector<rpc::Procedure> Migrations::procedures() {
    std::vector<rpc::Procedure> t = {
        {Proc::DOMAIN_MIGRATE_BEGIN3_PARAMS, rpc::Access::write,
         [this](rpc::Caller& c, Reader& a) {
             std::string missing;
             auto v = take_domain(store_, a, missing);
             if (!v) return missing.empty() ? undecodable("DOMAIN_MIGRATE_BEGIN3_PARAMS") : no_domain(missing);
             return begin(c.connection, *v, a);
         }},
        {Proc::DOMAIN_MIGRATE_PREPARE3_PARAMS, rpc::Access::write, [this](rpc::Caller& c, Reader& a) { return prepare(c.connection, a); }},
        {Proc::DOMAIN_MIGRATE_PERFORM3_PARAMS, rpc::Access::write,
         on_domain(store_, "DOMAIN_MIGRATE_PERFORM3_PARAMS", [this](const DomainView& v, Reader& a) {
             Reply r = perform(v, a);
             if (r.error) end_protection(v.def.uuid);  // no Confirm3 follows a failed Perform3
             return r;
         })},
        {Proc::DOMAIN_MIGRATE_FINISH3_PARAMS, rpc::Access::write, [this](rpc::Caller&, Reader& a) { return finish(a); }},
        {Proc::DOMAIN_MIGRATE_CONFIRM3_PARAMS, rpc::Access::write,
         on_domain(store_, "DOMAIN_MIGRATE_CONFIRM3_PARAMS", [this](const DomainView& v, Reader& a) { return confirm(v, a); })},
    };
    // The steps without typed parameters (libvirt-python's dom.migrate(), virDomainMigrate and
    // virDomainMigrate2 send them): rewritten as their _PARAMS twins and answered by those.
    using Translate = vmm::Result<std::vector<uint8_t>> (*)(Reader&);
    auto legacy = [&t](Proc old, Proc twin, Translate translate) {
        rpc::Handler params = std::find_if(t.begin(), t.end(), [twin](const rpc::Procedure& p) {
                                  return p.number == rpc::number_of(twin);
                              })->handler;
        return rpc::Procedure(old, rpc::Access::write, [params, translate](rpc::Caller& c, Reader& a) -> Reply {
            auto payload = translate(a);
            if (!payload) return refuse(VIR_ERR_RPC, payload.error().message());
            Reader twin_args(*payload);
            return params(c, twin_args);
        });
    };
    std::vector<rpc::Procedure> old_steps = {
        legacy(Proc::DOMAIN_MIGRATE_BEGIN3, Proc::DOMAIN_MIGRATE_BEGIN3_PARAMS, begin3_as_params),
        legacy(Proc::DOMAIN_MIGRATE_PREPARE3, Proc::DOMAIN_MIGRATE_PREPARE3_PARAMS, prepare3_as_params),
        legacy(Proc::DOMAIN_MIGRATE_PERFORM3, Proc::DOMAIN_MIGRATE_PERFORM3_PARAMS, perform3_as_params),
        legacy(Proc::DOMAIN_MIGRATE_FINISH3, Proc::DOMAIN_MIGRATE_FINISH3_PARAMS, finish3_as_params),
        legacy(Proc::DOMAIN_MIGRATE_CONFIRM3, Proc::DOMAIN_MIGRATE_CONFIRM3_PARAMS, confirm3_as_params),
    };
    for (rpc::Procedure& p : old_steps) t.push_back(std::move(p));
    for (rpc::Procedure& p : job_procedures_.procedures()) t.push_back(std::move(p));
    return t;
}

}  // namespace vmmd
