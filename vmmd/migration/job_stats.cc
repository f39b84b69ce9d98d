#include "vmmd/migration/job_stats.h"

#include <algorithm>
#include <cmath>

#include <libvirt/libvirt.h>

namespace vmmd {

using vmm::Error;
using vmm::monitor::Json;
namespace js = vmm::monitor;

JobStats job_from_query_migrate(const Json& q, int operation) {
    JobStats j;
    j.operation = operation;
    std::string status = js::str(q, "status");
    if (status == "completed") j.type = VIR_DOMAIN_JOB_COMPLETED;
    else if (status == "failed") j.type = VIR_DOMAIN_JOB_FAILED;
    else if (status == "cancelled") j.type = VIR_DOMAIN_JOB_CANCELLED;
    else if (status == "none" || status.empty()) j.type = VIR_DOMAIN_JOB_NONE;
    else j.type = VIR_DOMAIN_JOB_UNBOUNDED;
    j.time_elapsed_ms = js::u64(q, "total-time");
    j.setup_time_ms = js::u64(q, "setup-time");
    if (js::member(q, "downtime") != nullptr) {
        j.has_downtime = true;
        j.downtime_ms = js::u64(q, "downtime");
    }
    const Json& ram = js::child(q, "ram");
    j.memory_total = js::u64(ram, "total");
    j.memory_processed = js::u64(ram, "transferred");
    j.memory_remaining = js::u64(ram, "remaining");
    j.memory_constant = js::u64(ram, "duplicate");
    j.memory_normal = js::u64(ram, "normal");
    j.memory_normal_bytes = js::u64(ram, "normal-bytes");
    j.memory_bps = static_cast<uint64_t>(js::num(ram, "mbps") * 1e6 / 8);  // QEMU's mbps is megabits
    // pages/s, a fraction in query-migrate (as QEMU gives it): rounded, as libvirt reports it
    j.memory_dirty_rate = static_cast<uint64_t>(std::llround(std::clamp(js::num(ram, "dirty-pages-rate"), 0.0, 1e15)));
    j.memory_iteration = js::u64(ram, "dirty-sync-count");
    j.memory_postcopy_requests = js::u64(ram, "postcopy-requests");
    j.auto_converge_throttle = static_cast<int32_t>(js::u64(q, "cpu-throttle-percentage"));
    if (j.type == VIR_DOMAIN_JOB_UNBOUNDED) j.time_remaining_ms = js::uint_member(q, "x-expected-remaining-ms");
    j.error = js::str(q, "error-desc");
    return j;
}

std::vector<rpc::TypedParam> job_params(const JobStats& j) {
    std::vector<rpc::TypedParam> p = {
        {VIR_DOMAIN_JOB_OPERATION, int32_t{j.operation}},
        {VIR_DOMAIN_JOB_TIME_ELAPSED, j.time_elapsed_ms},
    };
    // Only when vmm can say it (libvirt: "may be missing"); 0 would tell a client the job is done.
    if (j.type == VIR_DOMAIN_JOB_UNBOUNDED && j.time_remaining_ms) {
        p.push_back({VIR_DOMAIN_JOB_TIME_REMAINING, *j.time_remaining_ms});
    }
    if (j.has_downtime) p.push_back({VIR_DOMAIN_JOB_DOWNTIME, j.downtime_ms});
    p.insert(p.end(), {
        {VIR_DOMAIN_JOB_SETUP_TIME, j.setup_time_ms},
        {VIR_DOMAIN_JOB_DATA_TOTAL, j.memory_total},
        {VIR_DOMAIN_JOB_DATA_PROCESSED, j.memory_processed},
        {VIR_DOMAIN_JOB_DATA_REMAINING, j.memory_remaining},
        {VIR_DOMAIN_JOB_MEMORY_TOTAL, j.memory_total},
        {VIR_DOMAIN_JOB_MEMORY_PROCESSED, j.memory_processed},
        {VIR_DOMAIN_JOB_MEMORY_REMAINING, j.memory_remaining},
        {VIR_DOMAIN_JOB_MEMORY_CONSTANT, j.memory_constant},
        {VIR_DOMAIN_JOB_MEMORY_NORMAL, j.memory_normal},
        {VIR_DOMAIN_JOB_MEMORY_NORMAL_BYTES, j.memory_normal_bytes},
        {VIR_DOMAIN_JOB_MEMORY_BPS, j.memory_bps},
        {VIR_DOMAIN_JOB_MEMORY_DIRTY_RATE, j.memory_dirty_rate},
        {VIR_DOMAIN_JOB_MEMORY_PAGE_SIZE, uint64_t{4096}},
        {VIR_DOMAIN_JOB_MEMORY_ITERATION, j.memory_iteration},
    });
    // As libvirt's QEMU driver: only once there were some ('virsh domjobinfo': "Postcopy requests").
    if (j.memory_postcopy_requests > 0) p.push_back({VIR_DOMAIN_JOB_MEMORY_POSTCOPY_REQS, j.memory_postcopy_requests});
    if (j.auto_converge_throttle > 0) p.push_back({VIR_DOMAIN_JOB_AUTO_CONVERGE_THROTTLE, j.auto_converge_throttle});
    if (j.type == VIR_DOMAIN_JOB_COMPLETED || j.type == VIR_DOMAIN_JOB_FAILED || j.type == VIR_DOMAIN_JOB_CANCELLED) {
        p.push_back({VIR_DOMAIN_JOB_SUCCESS, j.type == VIR_DOMAIN_JOB_COMPLETED});
    }
    if (!j.error.empty()) p.push_back({VIR_DOMAIN_JOB_ERRMSG, j.error});
    return p;
}

Json job_to_json(const JobStats& j) {
    return Json{{"type", j.type}, {"operation", j.operation}, {"time-elapsed", j.time_elapsed_ms},
                {"setup-time", j.setup_time_ms}, {"has-downtime", j.has_downtime}, {"downtime", j.downtime_ms},
                {"memory-total", j.memory_total}, {"memory-processed", j.memory_processed},
                {"memory-remaining", j.memory_remaining}, {"memory-constant", j.memory_constant},
                {"memory-normal", j.memory_normal}, {"memory-normal-bytes", j.memory_normal_bytes},
                {"memory-bps", j.memory_bps}, {"memory-dirty-rate", j.memory_dirty_rate},
                {"memory-iteration", j.memory_iteration}, {"memory-postcopy-requests", j.memory_postcopy_requests},
                {"throttle", j.auto_converge_throttle}, {"error", j.error}};
}

vmm::Result<JobStats> job_from_json(const Json& in) {
    JobStats j;
    struct U {
        const char* name;
        uint64_t* to;
    } numbers[] = {{"time-elapsed", &j.time_elapsed_ms}, {"setup-time", &j.setup_time_ms}, {"downtime", &j.downtime_ms},
                   {"memory-total", &j.memory_total}, {"memory-processed", &j.memory_processed},
                   {"memory-remaining", &j.memory_remaining}, {"memory-constant", &j.memory_constant},
                   {"memory-normal", &j.memory_normal}, {"memory-normal-bytes", &j.memory_normal_bytes},
                   {"memory-bps", &j.memory_bps}, {"memory-dirty-rate", &j.memory_dirty_rate},
                   {"memory-iteration", &j.memory_iteration},
                   {"memory-postcopy-requests", &j.memory_postcopy_requests}};
    for (const U& u : numbers) {
        auto v = js::uint_member(in, u.name);
        if (!v) return Error(std::string("job statistics: '") + u.name + "' is missing or not a number");
        *u.to = *v;
    }
    auto type = js::uint_member(in, "type");
    auto operation = js::uint_member(in, "operation");
    auto throttle = js::uint_member(in, "throttle");
    auto has_downtime = js::bool_member(in, "has-downtime");
    auto error = js::string_member(in, "error");
    if (!type || *type > VIR_DOMAIN_JOB_CANCELLED || !operation || *operation > 16 || !throttle || *throttle > 100 ||
        !has_downtime || !error) {
        return Error("job statistics: type, operation, throttle, has-downtime or error is missing or out of range");
    }
    j.type = static_cast<int>(*type);
    j.operation = static_cast<int>(*operation);
    j.auto_converge_throttle = static_cast<int32_t>(*throttle);
    j.has_downtime = *has_downtime;
    j.error = *error;
    return j;
}

}  // namespace vmmd
