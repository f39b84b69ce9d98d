#include "vmmd/migration/migration_jobs.h"

#include <fmt/format.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <charconv>

#include "vmmd/domain/domain_args.h"

namespace vmmd {

using rpc::Proc;
using rpc::Reply;
using vmm::monitor::Json;
using xdr::Reader;
using xdr::Writer;

namespace {

using Job = MigrationJob;

// migrate-setspeed/getspeed --postcopy (VIR_DOMAIN_MIGRATE_MAX_SPEED_POSTCOPY): the postcopy push's cap.
constexpr uint32_t kPostcopySpeed = VIR_DOMAIN_MIGRATE_MAX_SPEED_POSTCOPY;
const char* speed_parameter(uint32_t flags) {
    return (flags & kPostcopySpeed) != 0 ? "max-postcopy-bandwidth" : "max-bandwidth";
}

// One of the vmm's migration parameters (query-migrate-parameters gives them as strings).
vmm::Result<uint64_t> vmm_parameter(Supervisor& sup, const Uuid& uuid, const char* name) {
    auto p = sup.qmp(uuid, "query-migrate-parameters");
    if (!p) return p.error();
    auto text = vmm::monitor::string_member(*p, name);
    uint64_t v = 0;
    if (!text || std::from_chars(text->data(), text->data() + text->size(), v).ec != std::errc()) {
        return vmm::Error(fmt::format("the vmm reports no number for its parameter '{}'", name));
    }
    return v;
}

Reply set_parameter(Supervisor& sup, const DomainView& v, const char* name, uint64_t value) {
    if (!v.active()) return not_running(v);
    if (auto r = sup.qmp(v.def.uuid, "migrate-set-parameters", Json{{name, value}}); !r) {
        return rpc::fail(VIR_ERR_OPERATION_FAILED, r.error().message());
    }
    return rpc::ok();
}

}  // namespace

std::optional<JobStats> MigrationJobs::current_job(const DomainView& v) {
    Job job = jobs_.get(v.def.uuid);
    if (!job.active || !v.active()) return std::nullopt;
    auto q = sup_.qmp(v.def.uuid, "query-migrate");
    if (!q) return std::nullopt;
    JobStats s = job_from_query_migrate(*q, job.operation);
    s.type = VIR_DOMAIN_JOB_UNBOUNDED;  // until Perform/Finish has seen its end, the job runs
    return s;
}

Reply MigrationJobs::job_stats(const DomainView& v, uint32_t flags) {
    if ((flags & ~uint32_t{VIR_DOMAIN_JOB_STATS_COMPLETED | VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED}) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_GET_JOB_STATS: unsupported flags ({:#x})", flags));
    }
    std::optional<JobStats> s;
    if ((flags & VIR_DOMAIN_JOB_STATS_COMPLETED) != 0) {
        s = jobs_.completed(v.def.uuid, (flags & VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED) != 0);
    } else {
        s = current_job(v);
    }
    Writer w;
    w.i32(s ? s->type : VIR_DOMAIN_JOB_NONE);
    rpc::encode_typed_params(w, s ? job_params(*s) : std::vector<rpc::TypedParam>{});
    return rpc::ok(std::move(w));
}

Reply MigrationJobs::job_info(const DomainView& v) {
    auto s = current_job(v);
    Writer w;
    w.i32(s ? s->type : VIR_DOMAIN_JOB_NONE);
    JobStats z = s.value_or(JobStats{});
    for (uint64_t x : {z.time_elapsed_ms, z.time_remaining_ms.value_or(0), z.memory_total, z.memory_processed, z.memory_remaining, z.memory_total,
                       z.memory_processed, z.memory_remaining, uint64_t{0}, uint64_t{0}, uint64_t{0}}) {
        w.u64(x);  // elapsed, remaining; data total/processed/remaining; memory the same; no files
    }
    return rpc::ok(std::move(w));
}

// domjobabort: cancels an outgoing migration; with --postcopy (VIR_DOMAIN_ABORT_JOB_POSTCOPY)
// pauses one in postcopy instead (postcopy_recovery.cc), which a cancel could not undo.
Reply MigrationJobs::abort(const DomainView& v, uint32_t flags) {
    if ((flags & ~uint32_t{VIR_DOMAIN_ABORT_JOB_POSTCOPY}) != 0) {
        return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("DOMAIN_ABORT_JOB_FLAGS: unsupported flags ({:#x})", flags));
    }
    if ((flags & VIR_DOMAIN_ABORT_JOB_POSTCOPY) != 0) return pause_postcopy_(v);
    Job job = jobs_.get(v.def.uuid);
    // An outgoing migration or a save (save_images.h): the vmm's migration is cancelled, the guest goes on.
    if (!job.active ||
        (job.operation != VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT && job.operation != VIR_DOMAIN_JOB_OPERATION_SAVE)) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, "Requested operation is not valid: no job is active on the domain");
    }
    if (auto r = sup_.qmp(v.def.uuid, "migrate-cancel"); !r) return rpc::fail(VIR_ERR_OPERATION_FAILED, r.error().message());
    return rpc::ok();
}

// virsh migrate-postcopy: the migration under way (started with --postcopy) switches now.
Reply MigrationJobs::start_postcopy(const DomainView& v) {
    Job job = jobs_.get(v.def.uuid);
    if (!job.active || job.operation != VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, "Requested operation is not valid: no job is active on the domain");
    }
    if (!job.postcopy) {
        return rpc::fail(VIR_ERR_OPERATION_INVALID, "Requested operation is not valid: switching to post-copy requires "
                                                    "migration to be started with VIR_MIGRATE_POSTCOPY flag");
    }
    if (auto r = sup_.qmp(v.def.uuid, "migrate-start-postcopy"); !r) return rpc::fail(VIR_ERR_OPERATION_FAILED, r.error().message());
    return rpc::ok();
}

std::vector<rpc::Procedure> MigrationJobs::procedures() {
    auto& st = store_;
    auto& sup = sup_;
    return {
        {Proc::DOMAIN_GET_JOB_INFO, rpc::Access::read_only,
         on_domain(st, "DOMAIN_GET_JOB_INFO", [this](const DomainView& v, Reader&) { return job_info(v); })},
        {Proc::DOMAIN_GET_JOB_STATS, rpc::Access::read_only,
         flagged(st, "DOMAIN_GET_JOB_STATS", [this](const DomainView& v, uint32_t f) { return job_stats(v, f); })},
        {Proc::DOMAIN_ABORT_JOB, rpc::Access::write,
         on_domain(st, "DOMAIN_ABORT_JOB", [this](const DomainView& v, Reader&) { return abort(v, 0); })},
        {Proc::DOMAIN_ABORT_JOB_FLAGS, rpc::Access::write,
         flagged(st, "DOMAIN_ABORT_JOB_FLAGS", [this](const DomainView& v, uint32_t f) { return abort(v, f); })},
        {Proc::DOMAIN_MIGRATE_START_POST_COPY, rpc::Access::write,
         flagged(st, "DOMAIN_MIGRATE_START_POST_COPY", [this](const DomainView& v, uint32_t) { return start_postcopy(v); })},
        {Proc::DOMAIN_MIGRATE_SET_MAX_DOWNTIME, rpc::Access::write,
         on_domain(st, "DOMAIN_MIGRATE_SET_MAX_DOWNTIME", [&sup](const DomainView& v, Reader& a) {
             auto ms = a.u64();
             auto flags = a.u32();
             if (!ms || !flags) return undecodable("DOMAIN_MIGRATE_SET_MAX_DOWNTIME");
             return set_parameter(sup, v, "downtime-limit", *ms);
         })},
        {Proc::DOMAIN_MIGRATE_GET_MAX_DOWNTIME, rpc::Access::read_only,
         flagged(st, "DOMAIN_MIGRATE_GET_MAX_DOWNTIME", [&sup](const DomainView& v, uint32_t) {
             if (!v.active()) return not_running(v);
             auto ms = vmm_parameter(sup, v.def.uuid, "downtime-limit");
             return ms ? rpc::ok_u64(*ms) : rpc::fail(VIR_ERR_OPERATION_FAILED, ms.error().message());
         })},
        {Proc::DOMAIN_MIGRATE_SET_MAX_SPEED, rpc::Access::write,
         on_domain(st, "DOMAIN_MIGRATE_SET_MAX_SPEED", [&sup](const DomainView& v, Reader& a) {
             auto mibs = a.u64();
             auto flags = a.u32();
             if (!mibs || !flags) return undecodable("DOMAIN_MIGRATE_SET_MAX_SPEED");
             if ((*flags & ~kPostcopySpeed) != 0) return rpc::fail(VIR_ERR_INVALID_ARG, fmt::format("unsupported flags ({:#x})", *flags));
             if (*mibs > kUnlimitedMigrationMiBs) return rpc::fail(VIR_ERR_OVERFLOW, fmt::format("bandwidth must be at most {} MiB/s", kUnlimitedMigrationMiBs));
             return set_parameter(sup, v, speed_parameter(*flags), *mibs == kUnlimitedMigrationMiBs ? 0 : *mibs * 1048576);
         })},
        {Proc::DOMAIN_MIGRATE_GET_MAX_SPEED, rpc::Access::read_only,
         flagged(st, "DOMAIN_MIGRATE_GET_MAX_SPEED", [&sup](const DomainView& v, uint32_t flags) {
             if (!v.active()) return not_running(v);
             auto bytes = vmm_parameter(sup, v.def.uuid, speed_parameter(flags));
             if (!bytes) return rpc::fail(VIR_ERR_OPERATION_FAILED, bytes.error().message());
             return rpc::ok_u64(*bytes == 0 ? kUnlimitedMigrationMiBs : *bytes / 1048576);
         })},
    };
}

}  // namespace vmmd
