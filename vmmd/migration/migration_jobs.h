// MigrationJobs: the job procedures (domjobinfo, domjobabort, migrate-postcopy) and the migration
// settings a client changes on a running domain (migrate-setspeed, migrate-setmaxdowntime and
// their getters), which go straight to the vmm's migration parameters: 'info
// migrate_parameters' there shows them. They read the job table Migrations keeps (a save or a
// restore is a job too); pausing a postcopy (domjobabort --postcopy) is Migrations' own
// (postcopy_recovery.cc), handed in.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "vmmd/domain/domain_store.h"
#include "vmmd/migration/job_stats.h"
#include "vmmd/migration/job_table.h"
#include "vmmd/rpc/dispatch.h"
#include "vmmd/runtime/supervisor.h"

namespace vmmd {

// libvirt's "unlimited" migration speed in MiB/s (what QEMU's driver reports by default).
constexpr uint64_t kUnlimitedMigrationMiBs = 8796093022207ULL;

class MigrationJobs {
public:
    using PausePostcopy = std::function<rpc::Reply(const DomainView&)>;
    MigrationJobs(DomainStore& store, Supervisor& supervisor, JobTable& jobs, PausePostcopy pause_postcopy)
        : store_(store), sup_(supervisor), jobs_(jobs), pause_postcopy_(std::move(pause_postcopy)) {}
    MigrationJobs(const MigrationJobs&) = delete;  // its procedures hold `this`
    MigrationJobs& operator=(const MigrationJobs&) = delete;

    std::vector<rpc::Procedure> procedures();

private:
    rpc::Reply job_stats(const DomainView& v, uint32_t flags);
    rpc::Reply job_info(const DomainView& v);
    rpc::Reply abort(const DomainView& v, uint32_t flags);
    rpc::Reply start_postcopy(const DomainView& v);
    std::optional<JobStats> current_job(const DomainView& v);

    DomainStore& store_;
    Supervisor& sup_;
    JobTable& jobs_;
    PausePostcopy pause_postcopy_;
};

}  // namespace vmmd
