// PostcopyRecovery: postcopy recovery through libvirt. A link that fails in postcopy leaves the
// guest split between two hosts: both vmm pause the migration (postcopy-paused) and keep their
// state. libvirt's QEMU driver keeps the migration job then, with the source "paused (post-copy
// failed)" and the destination "running (post-copy failed)", and 'virsh migrate --postcopy
// --postcopy-resume' runs the five steps again on it: Prepare tells the destination's vmm
// migrate_recover, Perform the source's 'migrate -r', Finish and Confirm wait for the last page.
// 'virsh domjobabort --postcopy' pauses a postcopy on purpose (vmm's migrate_pause), for a
// recovery over another link. It owns the watchers of incoming postcopies: each follows its vmm
// until the migration ends, saying "running (post-copy failed)" while its link is down.
#pragma once

#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/migration/incoming_addresses.h"
#include "vmmd/migration/job_table.h"
#include "vmmd/migration/migration_driver.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/rpc/typed_params.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

class PostcopyRecovery {
public:
    PostcopyRecovery(DomainStore& store, Supervisor& supervisor, JobTable& jobs, MigrationDriver& driver,
                     IncomingAddresses& addresses, const std::string& hostname)
        : store_(store), sup_(supervisor), jobs_(jobs), driver_(driver), addresses_(addresses), hostname_(hostname) {}

    // The five steps with VIR_MIGRATE_POSTCOPY_RESUME (Confirm is the migration's own).
    rpc::Reply begin(const DomainView& v, uint32_t flags);
    rpc::Reply prepare(const DomainDef& def, const std::vector<rpc::TypedParam>& params);
    vmm::Result<JobStats> perform(const DomainView& v, const MigrationUri& uri, const std::vector<rpc::TypedParam>& params);
    rpc::Reply finish(const DomainView& v, int32_t cancelled);
    // domjobabort --postcopy: pauses an outgoing postcopy.
    rpc::Reply pause(const DomainView& v);
    // The source in postcopy: its link failed; the domain stays paused, the job waits to resume.
    void failed_here(const Uuid& uuid);
    // The incoming side after Finish in postcopy: watches the vmm until its migration ends, and
    // says "running (post-copy failed)" if the link fails before it does.
    void watch(const Uuid& uuid);

private:
    void watch_loop(std::stop_token stop, Uuid uuid);

    DomainStore& store_;
    Supervisor& sup_;
    JobTable& jobs_;
    MigrationDriver& driver_;
    IncomingAddresses& addresses_;
    const std::string& hostname_;
    std::mutex watch_mutex_;
    std::map<Uuid, std::jthread> watches_;  // last: stopped and joined before the rest goes
};

}  // namespace vmmd
