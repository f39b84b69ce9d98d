// Migrations: libvirt's version-3 migration with typed parameters, as the client library drives
// it across two connections (docs/libvirt.md has the sequence): Begin3 and Perform3 and Confirm3
// on the source's vmmd, Prepare3 and Finish3 on the destination's. Each vmmd drives its own vmm
// over QMP: the destination starts 'vmm --incoming', the source runs 'migrate' and waits. Also
// the job procedures (domjobinfo, domjobabort) and the speed and downtime settings, which go
// straight to the vmm's migration parameters (MigrationJobs). With --p2p the source's vmmd is itself the client
// that drives the steps (vmmd/peer). The vmm's side of each step is MigrationDriver's; a
// recovery of a postcopy whose link failed, PostcopyRecovery's. Migrations itself owns who holds
// what: the connection that prepared each incoming migration, and each change protection.
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

#include "vmmd/migration/incoming_addresses.h"
#include "vmmd/migration/migration_driver.h"
#include "vmmd/migration/migration_jobs.h"
#include "vmmd/migration/postcopy_recovery.h"
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
    using Events = MigrationEvents;
    // `self_uri`: this vmmd's own read-write socket, which a --p2p migration connects to.
    Migrations(DomainStore& store, Supervisor& supervisor, std::string hostname, std::string self_uri, Events events = {})
        : store_(store), sup_(supervisor), hostname_(std::move(hostname)), self_uri_(std::move(self_uri)),
          addresses_(hostname_), driver_(store_, sup_, jobs_, std::move(events)) {}
    // virsh migrate --tls: both vmm of such a migration get tls-creds DIR (QEMU's layout, as
    // libvirt's migrate_tls_x509_cert_dir); without it --tls is refused by name.
    void use_migration_tls(std::string dir) { driver_.use_tls(std::move(dir)); }
    // vmmd's defaults for when a migration must end (deadline_settings.h).
    void use_migration_deadline(DeadlineSettings d) { driver_.use_deadline(std::move(d)); }
    // --migration-address: where an incoming migration listens when its URI names no host
    // (else the address the host's name resolves to; never every address).
    void use_migration_address(std::string address) { addresses_.use_migration_address(std::move(address)); }
    std::vector<rpc::Procedure> procedures();
    // Each domain's job: a save or a restore (save_images.h) is one too, so that domjobinfo
    // shows it, domjobabort cancels it, and a migration waits for it.
    JobTable& jobs() { return jobs_; }
    // vmmd is stopping: a step that waits for a migration's end gives up ("vmmd is stopping"); the
    // migration itself goes on in the vmm, which outlives vmmd.
    void stop() { driver_.stop(); }
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
    bool settling_incoming(const Uuid& uuid);  // an adopted incoming being ended: waited for
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
    void end_protection(const Uuid& uuid);

    DomainStore& store_;
    Supervisor& sup_;
    std::string hostname_;
    std::string self_uri_;
    JobTable jobs_;
    IncomingAddresses addresses_;  // where incoming migrations listen; their reserved ports
    MigrationDriver driver_;
    MigrationJobs job_procedures_{store_, sup_, jobs_, [this](const DomainView& v) { return recovery_.pause(v); }};
    std::mutex mutex_;                       // for prepared_by_ and protected_by_
    std::map<Uuid, uint64_t> prepared_by_;   // incoming migrations before Finish: the connection that prepared each
    std::map<Uuid, uint64_t> protected_by_;  // outgoing ones with change protection: the connection that began each
    PostcopyRecovery recovery_{store_, sup_, jobs_, driver_, addresses_, hostname_};  // last: its watchers stop first
};

}  // namespace vmmd
