// MigrationDriver (migration_driver.h): libvirt's flags and parameters as vmm's settings,
// 'migrate', and the wait for its end.
#include "vmmd/migration/migration_driver.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <thread>

#include "vmmd/migration/migration_jobs.h"
#include "vmmd/migration/pin_limit.h"

namespace vmmd {

using vmm::Error;
using vmm::monitor::Json;

namespace {

constexpr uint64_t kDefaultParallelConnections = 2;  // libvirt's default for --parallel
constexpr std::chrono::milliseconds kPollInterval{20};

}  // namespace

// --tls without the credentials it needs is refused by name, on either side.
std::optional<std::string> MigrationDriver::tls_refusal(uint32_t flags) const {
    if ((flags & VIR_MIGRATE_TLS) == 0 || !tls_dir_.empty()) return std::nullopt;
    return "--tls: this vmmd has no migration credentials: start it with --migrate-tls-dir DIR (QEMU's layout: "
           "ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem, client-key.pem)";
}


vmm::Status MigrationDriver::apply_settings(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                       const std::vector<rpc::TypedParam>& params) {
    bool parallel = (flags & VIR_MIGRATE_PARALLEL) != 0, pin_all = (flags & VIR_MIGRATE_RDMA_PIN_ALL) != 0;
    if (pin_all && !uri.rdma()) return Error("--rdma-pin-all needs an rdma:// migration URI");
    if (parallel && uri.rdma()) return Error("--parallel is vmm's multifd, which runs over tcp:// only");
    Json caps = Json::array({Json{{"capability", "auto-converge"}, {"state", (flags & VIR_MIGRATE_AUTO_CONVERGE) != 0}},
                             Json{{"capability", "multifd"}, {"state", parallel}}});
    if (uri.rdma()) caps.push_back(Json{{"capability", "rdma-pin-all"}, {"state", pin_all}});
    caps.push_back(Json{{"capability", "postcopy-ram"}, {"state", (flags & VIR_MIGRATE_POSTCOPY) != 0}});
    if (auto r = sup_.qmp(v.def.uuid, "migrate-set-capabilities", Json{{"capabilities", caps}}); !r) return r.error();
    auto p = parameters(v, uri, flags, params);
    if (!p) return p.error();
    if (!p->empty()) {
        if (auto r = sup_.qmp(v.def.uuid, "migrate-set-parameters", *p); !r) return r.error();
    }
    return {};
}

vmm::Result<Json> MigrationDriver::parameters(const DomainView& v, const MigrationUri& uri, uint32_t flags,
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
        if (**bandwidth > kUnlimitedMigrationMiBs) return Error(fmt::format("bandwidth {} MiB/s is more than libvirt's unlimited", **bandwidth));
        p["max-bandwidth"] = **bandwidth >= kUnlimitedMigrationMiBs ? 0 : **bandwidth * 1048576;
    }
    if (*postcopy_bandwidth) {
        if (**postcopy_bandwidth > kUnlimitedMigrationMiBs) return Error("postcopy bandwidth is more than libvirt's unlimited");
        p["max-postcopy-bandwidth"] = **postcopy_bandwidth >= kUnlimitedMigrationMiBs ? 0 : **postcopy_bandwidth * 1048576;
    }
    // --tls: every connection of the migration is TLS with this host's credentials (the
    // destination's name checked against tls.destination, else the URI's host); without it, none.
    bool tls = (flags & VIR_MIGRATE_TLS) != 0;
    auto tls_destination = rpc::string_param(params, VIR_MIGRATE_PARAM_TLS_DESTINATION);
    if (!tls_destination) return tls_destination.error();
    p["tls-creds"] = tls ? tls_dir_ : "";
    p["tls-hostname"] = tls && *tls_destination ? **tls_destination : "";
    p["x-fallback-uri"] = vmm_fallback_uri(uri);  // where a broken link's precopy may go on (rdma://A,tcp://B)
    if (*initial) p["cpu-throttle-initial"] = **initial;
    if (*increment) p["cpu-throttle-increment"] = **increment;
    auto ends = deadline_parameters(v.def, params, deadline_);
    if (!ends) return ends.error();
    p.update(*ends);
    if (uri.rdma() && !pin_all && v.def.hard_limit_kib) {
        auto limit = dynamic_pin_limit(v.def.memory_kib * 1024, *v.def.hard_limit_kib * 1024);
        if (!limit) return limit.error();
        if (*limit) p["rdma-pin-limit"] = **limit;
    }
    return p;
}

vmm::Result<JobStats> MigrationDriver::run_outgoing(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                               const std::vector<rpc::TypedParam>& params) {
    if (auto s = apply_settings(v, uri, flags, params); !s) return s.error();
    MigrationJob job{VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT, true, false, std::nullopt, (flags & VIR_MIGRATE_POSTCOPY) != 0};
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

void MigrationDriver::announce_iterations(const Uuid& uuid, uint64_t count) {
    auto fresh = jobs_.iterations_reached(uuid, count);
    if (!fresh) return;
    auto v = store_.by_uuid(uuid);
    if (!v || !events_.iteration) return;
    for (uint64_t i = fresh->first; i <= fresh->second; ++i) events_.iteration(v->def, v->id, static_cast<int>(i));
}

void MigrationDriver::job_completed(const Uuid& uuid, const JobStats& stats) {
    if (!jobs_.complete(uuid, stats)) return;
    auto v = store_.by_uuid(uuid);
    if (v && events_.completed) events_.completed(v->def, v->id, stats);
}

bool MigrationDriver::in_postcopy(const Uuid& uuid) {
    auto q = sup_.qmp(uuid, "query-migrate");
    return q && vmm::monitor::str(*q, "status").starts_with("postcopy-");
}

vmm::Result<JobStats> MigrationDriver::await_end(const Uuid& uuid, int operation,
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


vmm::Result<std::string> MigrationDriver::status(const Uuid& uuid) {
    auto q = sup_.qmp(uuid, "query-migrate");
    if (!q) return q.error();
    return vmm::monitor::str(*q, "status");
}


void MigrationDriver::incoming_completed(const Uuid& uuid) {
    auto q = sup_.qmp(uuid, "query-migrate");
    if (!q) return;  // the vmm went: nothing to report
    job_completed(uuid, job_from_query_migrate(*q, VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN));
}

}  // namespace vmmd
