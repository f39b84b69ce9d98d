// The source's part of a migration: Perform3 turns libvirt's flags and typed parameters into
// vmm's capabilities and parameters, runs vmm's migration and waits for its end.
#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <thread>

#include "vmm/common/log.h"
#include "vmmd/daemon/domain_args.h"
#include "vmmd/daemon/migrations.h"
#include "vmmd/migration/pin_limit.h"
#include "vmmd/peer/peer_migration.h"

namespace vmmd {

using rpc::Reply;
using vmm::Error;
using vmm::monitor::Json;
using xdr::Reader;
using xdr::Writer;

namespace {

constexpr uint32_t kServedFlags = VIR_MIGRATE_LIVE | VIR_MIGRATE_PERSIST_DEST | VIR_MIGRATE_UNDEFINE_SOURCE |
                                  VIR_MIGRATE_PAUSED | VIR_MIGRATE_NON_SHARED_DISK | VIR_MIGRATE_NON_SHARED_INC |
                                  VIR_MIGRATE_CHANGE_PROTECTION | VIR_MIGRATE_UNSAFE | VIR_MIGRATE_ABORT_ON_ERROR |
                                  VIR_MIGRATE_AUTO_CONVERGE | VIR_MIGRATE_RDMA_PIN_ALL | VIR_MIGRATE_PARALLEL |
                                  VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_POSTCOPY | VIR_MIGRATE_POSTCOPY_RESUME |
                                  VIR_MIGRATE_TLS;
constexpr uint64_t kDefaultParallelConnections = 2;  // libvirt's default for --parallel
constexpr std::chrono::milliseconds kPollInterval{20};

// Why a flag the vmm driver does not serve is refused (nullopt: every flag is served).
std::optional<std::string> unserved(uint32_t flags) {
    struct Named {
        uint32_t flag;
        const char* why;
    } names[] = {
        {VIR_MIGRATE_TUNNELLED, "--tunnelled: vmm migrates over its own connection, not through libvirt's"},
        {VIR_MIGRATE_OFFLINE, "--offline: define the domain on the destination instead"},
        {VIR_MIGRATE_COMPRESSED, "--compressed: vmm does not compress migration data"},
    };
    for (const Named& n : names)
        if ((flags & n.flag) != 0) return n.why;
    if ((flags & ~kServedFlags) != 0) return fmt::format("migration flags {:#x} are not served by the vmm driver", flags & ~kServedFlags);
    return std::nullopt;
}

}  // namespace

// --tls without the credentials it needs is refused by name, on either side.
std::optional<std::string> Migrations::tls_refusal(uint32_t flags) const {
    if ((flags & VIR_MIGRATE_TLS) == 0 || !tls_dir_.empty()) return std::nullopt;
    return "--tls: this vmmd has no migration credentials: start it with --migrate-tls-dir DIR (QEMU's layout: "
           "ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem, client-key.pem)";
}

vmm::Status Migrations::apply_settings(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                       const std::vector<rpc::TypedParam>& params) {
    bool parallel = (flags & VIR_MIGRATE_PARALLEL) != 0, pin_all = (flags & VIR_MIGRATE_RDMA_PIN_ALL) != 0;
    if (pin_all && !uri.rdma()) return Error("--rdma-pin-all needs an rdma:// migration URI");
    if (parallel && uri.rdma()) return Error("--parallel is vmm's multifd, which runs over tcp:// only");
    Json caps = Json::array({Json{{"capability", "auto-converge"}, {"state", (flags & VIR_MIGRATE_AUTO_CONVERGE) != 0}},
                             Json{{"capability", "multifd"}, {"state", parallel}}});
    if (uri.rdma()) caps.push_back(Json{{"capability", "rdma-pin-all"}, {"state", pin_all}});
    caps.push_back(Json{{"capability", "postcopy-ram"}, {"state", (flags & VIR_MIGRATE_POSTCOPY) != 0}});
    if (auto r = sup_.qmp(v.def.uuid, "migrate-set-capabilities", Json{{"capabilities", caps}}); !r) return r.error();
    auto p = migration_parameters(v, uri, flags, params);
    if (!p) return p.error();
    if (!p->empty()) {
        if (auto r = sup_.qmp(v.def.uuid, "migrate-set-parameters", *p); !r) return r.error();
    }
    return {};
}

vmm::Result<Json> Migrations::migration_parameters(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                                   const std::vector<rpc::TypedParam>& params) {
    bool parallel = (flags & VIR_MIGRATE_PARALLEL) != 0, pin_all = (flags & VIR_MIGRATE_RDMA_PIN_ALL) != 0;
    Json p = Json::object();
    auto connections = rpc::uint_param(params, VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS);
    auto bandwidth = rpc::uint_param(params, VIR_MIGRATE_PARAM_BANDWIDTH);
    auto initial = rpc::uint_param(params, VIR_MIGRATE_PARAM_AUTO_CONVERGE_INITIAL);
    auto increment = rpc::uint_param(params, VIR_MIGRATE_PARAM_AUTO_CONVERGE_INCREMENT);
    auto postcopy_bandwidth = rpc::uint_param(params, VIR_MIGRATE_PARAM_BANDWIDTH_POSTCOPY);
    for (const auto* r : {&connections, &bandwidth, &initial, &increment, &postcopy_bandwidth})
        if (!*r) return r->error();
    // As libvirt's QEMU driver: a connection count without --parallel would be silently unused.
    if (*connections && !parallel) return Error("Turn parallel migration on to tune it (parallel.connections without --parallel)");
    if (parallel) p["multifd-channels"] = connections->value_or(kDefaultParallelConnections);
    if (*bandwidth) {
        if (**bandwidth > kUnlimitedMiBs) return Error(fmt::format("bandwidth {} MiB/s is more than libvirt's unlimited", **bandwidth));
        p["max-bandwidth"] = **bandwidth >= kUnlimitedMiBs ? 0 : **bandwidth * 1048576;
    }
    if (*postcopy_bandwidth) {
        if (**postcopy_bandwidth > kUnlimitedMiBs) return Error("postcopy bandwidth is more than libvirt's unlimited");
        p["max-postcopy-bandwidth"] = **postcopy_bandwidth >= kUnlimitedMiBs ? 0 : **postcopy_bandwidth * 1048576;
    }
    // --tls: every connection of the migration is TLS with this host's credentials (the
    // destination's name checked against tls.destination, else the URI's host); without it, none.
    bool tls = (flags & VIR_MIGRATE_TLS) != 0;
    auto tls_destination = rpc::string_param(params, VIR_MIGRATE_PARAM_TLS_DESTINATION);
    if (!tls_destination) return tls_destination.error();
    p["tls-creds"] = tls ? tls_dir_ : "";
    p["tls-hostname"] = tls && *tls_destination ? **tls_destination : "";
    if (*initial) p["cpu-throttle-initial"] = **initial;
    if (*increment) p["cpu-throttle-increment"] = **increment;
    if (uri.rdma() && !pin_all && v.def.hard_limit_kib) {
        auto limit = dynamic_pin_limit(v.def.memory_kib * 1024, *v.def.hard_limit_kib * 1024);
        if (!limit) return limit.error();
        if (*limit) p["rdma-pin-limit"] = **limit;
    }
    return p;
}

vmm::Result<JobStats> Migrations::run_outgoing(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                               const std::vector<rpc::TypedParam>& params) {
    if (auto s = apply_settings(v, uri, flags, params); !s) return s.error();
    Job job{VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, true, false, std::nullopt, (flags & VIR_MIGRATE_POSTCOPY) != 0};
    job.protect = (flags & VIR_MIGRATE_CHANGE_PROTECTION) != 0;
    if ((flags & VIR_MIGRATE_LIVE) == 0 && v.state.state == VIR_DOMAIN_RUNNING) {
        if (auto r = sup_.qmp(v.def.uuid, "stop"); !r) return r.error();
        job.paused_for_it = true;
        sup_.set_state(v.def.uuid, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION},
                       LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED});
    }
    jobs_.set(v.def.uuid, job);
    sup_.set_phase(v.def.uuid, MigrationPhase::outgoing);
    if (auto r = sup_.qmp(v.def.uuid, "migrate", Json{{"uri", vmm_uri(uri)}}); !r) return r.error();
    // With --postcopy, Perform ends at the switch, as libvirt's QEMU driver does: the
    // destination's Finish runs the guest there, and Confirm waits for the last pages.
    return await_end(v.def.uuid, VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, std::nullopt, job.postcopy);
}

void Migrations::announce_iterations(const Uuid& uuid, uint64_t count) {
    auto fresh = jobs_.iterations_reached(uuid, count);
    if (!fresh) return;
    auto v = store_.by_uuid(uuid);
    if (!v || !events_.iteration) return;
    for (uint64_t i = fresh->first; i <= fresh->second; ++i) events_.iteration(v->def, v->id, static_cast<int>(i));
}

void Migrations::job_completed(const Uuid& uuid, const JobStats& stats) {
    if (!jobs_.complete(uuid, stats)) return;
    auto v = store_.by_uuid(uuid);
    if (v && events_.completed) events_.completed(v->def, v->id, stats);
}

bool Migrations::in_postcopy(const Uuid& uuid) {
    auto q = sup_.qmp(uuid, "query-migrate");
    return q && vmm::monitor::str(*q, "status").starts_with("postcopy-");
}

vmm::Result<JobStats> Migrations::await_end(const Uuid& uuid, int operation,
                                            std::optional<std::chrono::steady_clock::time_point> deadline,
                                            bool until_postcopy) {
    for (;;) {
        auto q = sup_.qmp(uuid, "query-migrate");
        if (!q) return q.error();
        JobStats s = job_from_query_migrate(*q, operation);
        if (operation == VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT) announce_iterations(uuid, s.memory_iteration);
        std::string status = vmm::monitor::str(*q, "status");
        if (s.type == VIR_DOMAIN_JOB_COMPLETED || (until_postcopy && status == "postcopy-active")) return s;
        if (status == "postcopy-paused") {
            return Error(fmt::format("postcopy paused ({}): the guest runs on the destination, which lacks pages only "
                                     "the source has; both vmm keep their state for a recovery (vmm's "
                                     "migrate_recover and migrate -r)",
                                     s.error.empty() ? "no reason recorded" : s.error));
        }
        if (s.type == VIR_DOMAIN_JOB_FAILED) return Error("migration failed: " + (s.error.empty() ? "no reason recorded" : s.error));
        if (s.type == VIR_DOMAIN_JOB_CANCELLED) return Error("operation aborted: migration job: canceled by client");
        if (deadline && std::chrono::steady_clock::now() > *deadline) return Error("the migration did not complete in time");
        if (stopping_) return Error("vmmd is stopping; the migration goes on in the vmm");
        std::this_thread::sleep_for(kPollInterval);
    }
}

Reply Migrations::perform(const DomainView& v, Reader& a) {
    auto dconnuri = a.optional_string(rpc::kMaxString);
    auto params = rpc::decode_typed_params(a);
    auto cookie_bytes = a.opaque(kMaxCookie);
    auto flags = a.u32();
    if (!dconnuri || !params || !cookie_bytes || !flags) return undecodable("DOMAIN_MIGRATE_PERFORM3_PARAMS");
    if (auto why = unserved(*flags)) return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED, *why);
    if (auto why = tls_refusal(*flags)) return rpc::fail(VIR_ERR_ARGUMENT_UNSUPPORTED, *why);
    if (auto cookie = decode_cookie(*cookie_bytes); !cookie) return rpc::fail(VIR_ERR_INVALID_ARG, cookie.error().message());
    if (!v.active()) return not_running(v);
    if ((*flags & VIR_MIGRATE_PEER2PEER) != 0) return perform_p2p(v, *dconnuri, *params, *flags);
    auto uri_text = rpc::string_param(*params, VIR_MIGRATE_PARAM_URI);
    if (!uri_text || !*uri_text) return rpc::fail(VIR_ERR_INVALID_ARG, "DOMAIN_MIGRATE_PERFORM3_PARAMS: no migrate_uri");
    auto uri = parse_migration_uri(**uri_text);
    if (!uri) return rpc::fail(VIR_ERR_INVALID_ARG, uri.error().message());
    if (uri->port == 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("migration URI '{}' has no port", **uri_text));
    bool resume = (*flags & VIR_MIGRATE_POSTCOPY_RESUME) != 0;
    auto done = resume ? run_resume(v, *uri, *params) : run_outgoing(v, *uri, *flags, *params);
    if (!done && in_postcopy(v.def.uuid)) {
        postcopy_failed_here(v.def.uuid);  // the guest is split: kept for --postcopy-resume
        return rpc::fail(VIR_ERR_OPERATION_FAILED, done.error().message());
    }
    Job job = jobs_.get(v.def.uuid);
    job.active = job.postcopy && done;  // in postcopy the job goes on until Confirm
    if (!done) {
        sup_.set_phase(v.def.uuid, MigrationPhase::none);  // the vmm keeps the guest through a failure
        jobs_.set(v.def.uuid, job);
        vmm::log::warn("vmmd: domain '{}': its migration failed (Perform): {}; the guest runs on here", v.def.name,
                       done.error().message());
        return rpc::fail(VIR_ERR_OPERATION_FAILED, done.error().message());
    }
    job.completed = *done;
    jobs_.set(v.def.uuid, job);
    auto reason = job.postcopy ? VIR_DOMAIN_PAUSED_POSTCOPY : VIR_DOMAIN_PAUSED_MIGRATION;
    auto event = job.postcopy ? VIR_DOMAIN_EVENT_SUSPENDED_POSTCOPY : VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED;
    bool announce = !job.paused_for_it && !resume;  // a resumed source was paused already
    sup_.set_state(v.def.uuid, {VIR_DOMAIN_PAUSED, reason},
                   announce ? std::optional(LifecycleEvent{VIR_DOMAIN_EVENT_SUSPENDED, event}) : std::nullopt);
    // Recorded before the answer goes: from here the destination may run the guest.
    sup_.set_phase(v.def.uuid, MigrationPhase::outgoing_done);
    vmm::log::info("vmmd: domain '{}': {} (Perform): held paused here until the client's Confirm", v.def.name,
                   job.postcopy ? "switched to postcopy" : "migrated");
    Writer w;
    w.opaque(encode_cookie({hostname_, v.def.name, v.def.uuid, *done}));
    return rpc::ok(std::move(w));
}

Reply Migrations::perform_p2p(const DomainView& v, const std::optional<std::string>& dconnuri,
                              const std::vector<rpc::TypedParam>& params, uint32_t flags) {
    if (!dconnuri || dconnuri->empty()) return rpc::fail(VIR_ERR_INVALID_ARG, "--p2p needs the destination's URI");
    // Each step comes back to this vmmd's own procedures (Begin3, Perform3 without --p2p,
    // Confirm3) on a connection of its own, and goes to the destination's (Prepare3, Finish3);
    // Begin3 refuses a domain that is migrating already.
    auto done = peer::migrate({self_uri_, *dconnuri, format_uuid(v.def.uuid), params, flags});
    if (!done) return rpc::fail(VIR_ERR_OPERATION_FAILED, done.error().message());
    Writer w;
    w.opaque({});  // no cookie: Confirm3 already ran
    return rpc::ok(std::move(w));
}

}  // namespace vmmd
