#include "vmmd/migration/job_table.h"

namespace vmmd {

void JobTable::set(const Uuid& uuid, const MigrationJob& job) {
    std::lock_guard lock(mutex_);
    jobs_[uuid] = job;
}

MigrationJob JobTable::get(const Uuid& uuid) const {
    std::lock_guard lock(mutex_);
    auto it = jobs_.find(uuid);
    return it == jobs_.end() ? MigrationJob{} : it->second;
}

std::optional<JobStats> JobTable::completed(const Uuid& uuid, bool keep) {
    std::lock_guard lock(mutex_);
    auto it = jobs_.find(uuid);
    if (it == jobs_.end()) return std::nullopt;
    std::optional<JobStats> s = it->second.completed;
    if (!keep) it->second.completed.reset();
    return s;
}

std::optional<std::pair<uint64_t, uint64_t>> JobTable::iterations_reached(const Uuid& uuid, uint64_t count) {
    std::lock_guard lock(mutex_);
    auto it = jobs_.find(uuid);
    if (it == jobs_.end() || !it->second.active || it->second.iterations >= count) return std::nullopt;
    std::pair<uint64_t, uint64_t> fresh{it->second.iterations + 1, count};
    it->second.iterations = count;
    return fresh;
}

bool JobTable::complete(const Uuid& uuid, const JobStats& stats) {
    std::lock_guard lock(mutex_);
    MigrationJob& job = jobs_[uuid];
    if (job.announced) return false;
    job.completed = stats;
    job.active = false;
    job.announced = true;
    return true;
}

}  // namespace vmmd
