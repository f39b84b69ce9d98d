// A migration job as libvirt reports one (virDomainGetJobStats, virsh domjobinfo): built from
// vmm's query-migrate, given to clients as typed parameters under libvirt's names, and carried
// to the destination in the migration cookie so that 'domjobinfo --completed' answers there too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/monitor/client/json_access.h"
#include "vmmd/rpc/typed_params.h"

namespace vmmd {

struct JobStats {
    int type = 0;       // virDomainJobType: NONE, UNBOUNDED (running), COMPLETED, FAILED, CANCELLED
    int operation = 0;  // virDomainJobOperation: MIGRATION_OUT or MIGRATION_IN
    uint64_t time_elapsed_ms = 0, setup_time_ms = 0, downtime_ms = 0;
    bool has_downtime = false;
    uint64_t memory_total = 0, memory_processed = 0, memory_remaining = 0;
    uint64_t memory_constant = 0, memory_normal = 0, memory_normal_bytes = 0;
    uint64_t memory_bps = 0, memory_dirty_rate = 0, memory_iteration = 0;
    uint64_t memory_postcopy_requests = 0;  // page requests in postcopy (the source's vmm: received)
    int32_t auto_converge_throttle = 0;
    // A running job's time left as vmm predicts it (query-migrate's x-expected-remaining-ms);
    // none while it cannot say (no byte moved yet, or rounds that never end at these rates).
    std::optional<uint64_t> time_remaining_ms;
    std::string error;  // why a failed job failed
    bool operator==(const JobStats&) const = default;
};

// From vmm's query-migrate answer (status, total-time, setup-time, downtime, ram{…},
// cpu-throttle-percentage). `elapsed_ms` replaces total-time while a job runs.
JobStats job_from_query_migrate(const vmm::monitor::Json& q, int operation);

// libvirt's typed parameters (VIR_DOMAIN_JOB_TIME_ELAPSED, _DATA_*, _MEMORY_*, _DOWNTIME, …).
std::vector<rpc::TypedParam> job_params(const JobStats& j);

// In a cookie: a JSON object with the same names, read back with every member checked.
vmm::monitor::Json job_to_json(const JobStats& j);
vmm::Result<JobStats> job_from_json(const vmm::monitor::Json& j);

}  // namespace vmmd
