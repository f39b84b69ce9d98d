// The migration job of each domain, as vmmd keeps it between the steps (what domjobinfo reads,
// what Begin refuses a second migration by, what Confirm resumes by). Pure bookkeeping,
// thread-safe: the steps of different migrations run side by side.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "vmmd/domain/domain_def.h"
#include "vmmd/migration/job_stats.h"

namespace vmmd {

struct MigrationJob {
    int operation = 0;  // VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT / _IN; 0: no job
    bool active = false;
    bool paused_for_it = false;  // a migration without VIR_MIGRATE_LIVE paused the guest
    std::optional<JobStats> completed;
    bool postcopy = false;         // started with VIR_MIGRATE_POSTCOPY: migrate-postcopy may switch it
    bool postcopy_failed = false;  // the link failed in postcopy: the job waits for --postcopy-resume
    uint64_t iterations = 0;       // outgoing: the memory iterations announced so far
    bool announced = false;        // its job-completed event went
    bool protect = false;          // VIR_MIGRATE_CHANGE_PROTECTION: the definition may not change while it runs
};

class JobTable {
public:
    void set(const Uuid& uuid, const MigrationJob& job);
    MigrationJob get(const Uuid& uuid) const;  // no job: a default MigrationJob
    // domjobinfo --completed: the last completed job's statistics, forgotten unless `keep`.
    std::optional<JobStats> completed(const Uuid& uuid, bool keep);
    // An active job's memory iterations reached `count`: the ones not announced yet, as
    // [first, last], now counted as announced; nothing if there are none.
    std::optional<std::pair<uint64_t, uint64_t>> iterations_reached(const Uuid& uuid, uint64_t count);
    // The job succeeded with `stats` (kept for --completed): true only the first time, when the
    // job-completed event is to go.
    bool complete(const Uuid& uuid, const JobStats& stats);

private:
    mutable std::mutex mutex_;
    std::map<Uuid, MigrationJob> jobs_;
};

}  // namespace vmmd
