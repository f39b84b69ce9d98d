// MigrationDriver: a domain's vmm migration, driven through its QMP socket. It turns libvirt's
// flags and typed parameters into vmm's capabilities and parameters, starts 'migrate', and polls
// query-migrate until the end, keeping the domain's job (JobTable) and raising the job's events
// (each memory iteration, the completed job). It owns what every step shares about the vmm's
// side: --migrate-tls-dir's credentials and whether vmmd is stopping.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/migration/deadline_settings.h"
#include "vmmd/migration/job_stats.h"
#include "vmmd/migration/job_table.h"
#include "vmmd/migration/migration_uri.h"
#include "vmmd/rpc/typed_params.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

// The events migrations raise (EventHub's).
struct MigrationEvents {
    // An outgoing migration's memory iteration (EventHub::migration_iteration).
    std::function<void(const DomainDef& def, int id, int iteration)> iteration;
    // A migration job succeeded here, with its statistics (EventHub::job_completed): the
    // source's at Confirm, the destination's once the guest and all its pages have arrived.
    std::function<void(const DomainDef& def, int id, const JobStats& stats)> completed;
};

class MigrationDriver {
public:
    MigrationDriver(DomainStore& store, Supervisor& supervisor, JobTable& jobs, MigrationEvents events)
        : store_(store), sup_(supervisor), jobs_(jobs), events_(std::move(events)) {}

    // virsh migrate --tls: both vmm of such a migration get tls-creds DIR (QEMU's layout).
    void use_tls(std::string dir) { tls_dir_ = std::move(dir); }
    const std::string& tls_dir() const { return tls_dir_; }
    // --migration-deadline, --migration-deadline-strategy, --migration-stall-timeout: for every
    // migration a domain's XML and the migration's parameters leave them to (deadline_settings.h).
    void use_deadline(DeadlineSettings d) { deadline_ = std::move(d); }
    // --tls without --migrate-tls-dir, refused by name (nullopt: nothing to refuse).
    std::optional<std::string> tls_refusal(uint32_t flags) const;
    // vmmd is stopping: a wait for a migration's end gives up (the migration goes on in the vmm).
    void stop() { stopping_ = true; }

    // Runs the vmm's migration to `uri` with the settings the flags and parameters ask for, and
    // waits for its end: the completed job, or why it failed.
    vmm::Result<JobStats> run_outgoing(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                       const std::vector<rpc::TypedParam>& params);
    // The vmm's migration parameters the flags and typed parameters ask for.
    vmm::Result<vmm::monitor::Json> parameters(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                               const std::vector<rpc::TypedParam>& params);
    // Polls the vmm's query-migrate until its migration ends: the completed job, or why not
    // (failed, cancelled, postcopy paused, past `deadline`, the vmm gone). `until_postcopy`: a
    // postcopy-active migration counts as ended too (the guest has moved; the pages follow).
    vmm::Result<JobStats> await_end(const Uuid& uuid, int operation,
                                    std::optional<std::chrono::steady_clock::time_point> deadline,
                                    bool until_postcopy = false);
    // The vmm's migration status ("postcopy-paused", …), or why it could not be read.
    vmm::Result<std::string> status(const Uuid& uuid);
    // Whether the domain's vmm is in a postcopy phase (the guest split between two hosts).
    bool in_postcopy(const Uuid& uuid);
    // The job succeeded with `stats`: kept for 'domjobinfo --completed' and announced once (a
    // postcopy's end is seen by both the watcher and a recovery's Finish).
    void job_completed(const Uuid& uuid, const JobStats& stats);
    // An incoming migration ended: the destination vmm's own figures complete the job.
    void incoming_completed(const Uuid& uuid);

private:
    vmm::Status apply_settings(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                               const std::vector<rpc::TypedParam>& params);
    // The outgoing job's vmm has synced its dirty bitmap `count` times: one event for each
    // sync not announced yet.
    void announce_iterations(const Uuid& uuid, uint64_t count);

    DomainStore& store_;
    Supervisor& sup_;
    JobTable& jobs_;
    MigrationEvents events_;
    std::string tls_dir_;  // --migrate-tls-dir: tls-creds for migrations asked with --tls
    DeadlineSettings deadline_;  // vmmd's defaults for every migration
    std::atomic<bool> stopping_{false};
};

}  // namespace vmmd
