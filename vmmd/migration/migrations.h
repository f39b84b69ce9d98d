// Migrations: libvirt's version-3 migration with typed parameters, as the client library drives
// it across two connections (docs/libvirt.md has the sequence): Begin3 and Perform3 and Confirm3
// on the source's vmmd, Prepare3 and Finish3 on the destination's. Each vmmd drives its own vmm
// over QMP: the destination starts 'vmm --incoming', the source runs 'migrate' and waits. Also
// the job procedures (domjobinfo, domjobabort) and the speed and downtime settings, which go
// straight to the vmm's migration parameters (MigrationJobs). With --p2p the source's vmmd is itself the client
// that drives the steps (vmmd/peer).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "vmmd/daemon/incoming_addresses.h"
#include "vmmd/daemon/migration_jobs.h"
#include "vmmd/domain/domain_store.h"
#include "vmmd/migration/cookie.h"
#include "vmmd/migration/job_stats.h"
#include "vmmd/migration/job_table.h"
#include "vmmd/migration/migration_uri.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/rpc/typed_params.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

class Migrations {
public:
    // The events migrations raise (EventHub's).
    struct Events {
        // An outgoing migration's memory iteration (EventHub::migration_iteration).
        std::function<void(const DomainDef& def, int id, int iteration)> iteration;
        // A migration job succeeded here, with its statistics (EventHub::job_completed): the
        // source's at Confirm, the destination's once the guest and all its pages have arrived.
        std::function<void(const DomainDef& def, int id, const JobStats& stats)> completed;
    };
    // `self_uri`: this vmmd's own read-write socket, which a --p2p migration connects to.
    Migrations(DomainStore& store, Supervisor& supervisor, std::string hostname, std::string self_uri, Events events = {})
        : store_(store), sup_(supervisor), hostname_(std::move(hostname)), self_uri_(std::move(self_uri)),
          events_(std::move(events)), addresses_(hostname_) {}
    // virsh migrate --tls: both vmm of such a migration get tls-creds DIR (QEMU's layout, as
    // libvirt's migrate_tls_x509_cert_dir); without it --tls is refused by name.
    void use_migration_tls(std::string dir) { tls_dir_ = std::move(dir); }
    // --migration-address: where an incoming migration listens when its URI names no host
    // (else the address the host's name resolves to; never every address).
    void use_migration_address(std::string address) { addresses_.use_migration_address(std::move(address)); }
    std::vector<rpc::Procedure> procedures();
    // Each domain's job: a save or a restore (save_images.h) is one too, so that domjobinfo
    // shows it, domjobabort cancels it, and a migration waits for it.
    JobTable& jobs() { return jobs_; }
    // vmmd is stopping: a step that waits for a migration's end gives up ("vmmd is stopping"); the
    // migration itself goes on in the vmm, which outlives vmmd.
    void stop() { stopping_ = true; }
    // A client's connection closed (the server's hook). An incoming migration that connection
    // prepared and never finished is ended, as libvirt's QEMU driver ends one (its close
    // callback): the source keeps the guest. One in postcopy is kept (the guest runs here).
    void connection_closed(uint64_t connection);
    // Why `uuid`'s definition may not change now (DomainStore's guard), or nullopt: a migration
    // asked with VIR_MIGRATE_CHANGE_PROTECTION holds it still from Begin3 to Confirm3 (or to a
    // failed Perform3, or the close of the connection that began it), as libvirt's does.
    std::optional<std::string> change_refusal(const Uuid& uuid);

    static constexpr uint64_t kUnlimitedMiBs = kUnlimitedMigrationMiBs;

private:
    using Job = MigrationJob;

    // The steps (migrations.cc, migration_perform.cc).
    rpc::Reply begin(uint64_t connection, const DomainView& v, xdr::Reader& a);
    // `connection`: the caller's, which owns the incoming domain until Finish.
    rpc::Reply prepare(uint64_t connection, xdr::Reader& a);
    vmm::Status start_incoming(const DomainDef& def, const MigrationUri& uri, uint32_t flags);
    rpc::Reply perform(const DomainView& v, xdr::Reader& a);
    // --p2p: this vmmd drives the whole sequence as the destination's client (vmmd/peer).
    rpc::Reply perform_p2p(const DomainView& v, const std::optional<std::string>& dconnuri,
                           const std::vector<rpc::TypedParam>& params, uint32_t flags);
    rpc::Reply finish(xdr::Reader& a);
    // Finish could not complete the incoming migration: the vmm is destroyed (kept and resumed
    // in postcopy, where the guest's newest state is here), and `why` is the answer.
    rpc::Reply finish_failed(const Uuid& uuid, uint32_t flags, const std::string& why);
    std::variant<DomainDef, rpc::Reply> finishing(const std::vector<rpc::TypedParam>& params);
    rpc::Reply confirm(const DomainView& v, xdr::Reader& a);
    rpc::Reply confirm_cancelled(const DomainView& v, Job job);
    // Runs vmm's migration to `uri` with the settings the flags and parameters ask for, and
    // waits for its end: the completed job, or why it failed.
    vmm::Result<JobStats> run_outgoing(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                       const std::vector<rpc::TypedParam>& params);
    // Polls the vmm's query-migrate until its migration ends: the completed job, or why not
    // (failed, cancelled, postcopy paused, past `deadline`, the vmm gone). `until_postcopy`: a
    // postcopy-active migration counts as ended too (the guest has moved; the pages follow).
    vmm::Result<JobStats> await_end(const Uuid& uuid, int operation,
                                    std::optional<std::chrono::steady_clock::time_point> deadline,
                                    bool until_postcopy = false);
    // Whether the domain's vmm is in a postcopy phase (the guest split between two hosts).
    bool in_postcopy(const Uuid& uuid);
    // The outgoing job's vmm has synced its dirty bitmap `count` times: one event for each
    // sync not announced yet.
    void announce_iterations(const Uuid& uuid, uint64_t count);
    // The job succeeded with `stats`: kept for 'domjobinfo --completed' and announced once (a
    // postcopy's end is seen by both the watcher and a recovery's Finish).
    void job_completed(const Uuid& uuid, const JobStats& stats);
    // An incoming postcopy ended: the destination vmm's own figures complete the job.
    void incoming_postcopy_completed(const Uuid& uuid);
    std::optional<std::string> tls_refusal(uint32_t flags) const;  // --tls without --migrate-tls-dir
    vmm::Status apply_settings(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                               const std::vector<rpc::TypedParam>& params);
    // Where the destination listens (incoming_addresses.h), from the client's migrate_uri.
    vmm::Result<IncomingAddresses::Incoming> listen_uri(const Uuid& uuid, const std::vector<rpc::TypedParam>& params);
    // The vmm's migration parameters the flags and typed parameters ask for.
    vmm::Result<Json> migration_parameters(const DomainView& v, const MigrationUri& uri, uint32_t flags,
                                           const std::vector<rpc::TypedParam>& params);
    // Prepare3's reply: our cookie and the URI the source connects to.
    rpc::Reply prepared(const DomainDef& def, const MigrationUri& told) const;
    // Finish3's reply: the domain as it runs here, and our cookie.
    rpc::Reply finished(const Uuid& uuid);

    // Postcopy recovery through libvirt (postcopy_recovery.cc): virsh migrate --postcopy-resume
    // runs the same five steps on a migration paused in postcopy (vmm's migrate_recover on the
    // destination, migrate -r on the source), and domjobabort --postcopy pauses one.
    rpc::Reply begin_resume(const DomainView& v, uint32_t flags);
    rpc::Reply prepare_resume(const DomainDef& def, const std::vector<rpc::TypedParam>& params);
    vmm::Result<JobStats> run_resume(const DomainView& v, const MigrationUri& uri,
                                     const std::vector<rpc::TypedParam>& params);
    rpc::Reply finish_resume(const DomainView& v, int32_t cancelled);
    rpc::Reply pause_postcopy(const DomainView& v);
    // The vmm's migration status ("postcopy-paused", …), or why it could not be read.
    vmm::Result<std::string> migration_status(const Uuid& uuid);
    // The incoming side after Finish in postcopy: watches the vmm until its migration ends, and
    // says "running (post-copy failed)" if the link fails before it does.
    void watch_postcopy(const Uuid& uuid);
    void watch_loop(std::stop_token stop, Uuid uuid);
    // The source in postcopy: its link failed; the domain stays paused, the job waits to resume.
    void postcopy_failed_here(const Uuid& uuid);

    DomainStore& store_;
    Supervisor& sup_;
    std::string hostname_;
    std::string self_uri_;
    Events events_;
    std::string tls_dir_;  // --migrate-tls-dir: tls-creds for migrations asked with --tls
    JobTable jobs_;
    MigrationJobs job_procedures_{store_, sup_, jobs_, [this](const DomainView& v) { return pause_postcopy(v); }};
    IncomingAddresses addresses_;  // where incoming migrations listen; their reserved ports
    std::mutex mutex_;             // for prepared_by_ and protected_by_
    std::map<Uuid, uint64_t> prepared_by_;  // incoming migrations before Finish: the connection that prepared each
    std::map<Uuid, uint64_t> protected_by_;  // outgoing ones with change protection: the connection that began each
    void end_protection(const Uuid& uuid);
    std::atomic<bool> stopping_{false};
    std::mutex watch_mutex_;
    std::map<Uuid, std::jthread> watches_;  // last: stopped and joined before the rest goes
};

}  // namespace vmmd
