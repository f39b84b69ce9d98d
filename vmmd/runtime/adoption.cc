#include "vmmd/runtime/adoption.h"

#include <libvirt/libvirt.h>

namespace vmmd {

namespace {

bool in_postcopy(const VmmStatus& v) { return v.migration.starts_with("postcopy-"); }

bool in_progress(const VmmStatus& v) {
    return !v.migration.empty() && v.migration != "none" && v.migration != "completed" && v.migration != "failed" &&
           v.migration != "cancelled" && !in_postcopy(v);
}

// The state to show for a vmm that is neither mid-migration nor held: the recorded one while it
// agrees with the vmm, else what the vmm says with the reason unknown.
DomainState as_it_runs(DomainState recorded, const VmmStatus& v) {
    bool runs = v.run == "running";
    if (runs == (recorded.state == VIR_DOMAIN_RUNNING)) return recorded;
    if (runs) return {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_UNKNOWN};
    if (v.run == "postmigrate" || v.run == "inmigrate") return {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION};
    return {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_UNKNOWN};
}

// Split by postcopy: the newest state runs on the destination, and each side holds what the other
// needs. Neither copy is ended; the source's stays paused (a resume would fork the guest).
Adoption split(MigrationPhase phase, const VmmStatus& v) {
    bool failed = v.migration == "postcopy-paused";
    if (phase == MigrationPhase::incoming) {
        DomainState shown{VIR_DOMAIN_PAUSED, failed ? VIR_DOMAIN_PAUSED_POSTCOPY_FAILED : VIR_DOMAIN_PAUSED_POSTCOPY};
        if (v.run == "running") shown = {VIR_DOMAIN_RUNNING, failed ? VIR_DOMAIN_RUNNING_POSTCOPY_FAILED : VIR_DOMAIN_RUNNING_POSTCOPY};
        return {Adoption::Action::keep, shown, MigrationPhase::none,
                "adopted in postcopy: the guest runs here and its last pages come from the source"};
    }
    return {Adoption::Action::keep,
            {VIR_DOMAIN_PAUSED, failed ? VIR_DOMAIN_PAUSED_POSTCOPY_FAILED : VIR_DOMAIN_PAUSED_POSTCOPY},
            MigrationPhase::outgoing_done,
            "adopted in postcopy: the guest runs on the destination; this copy stays paused and serves its pages"};
}

Adoption incoming(const VmmStatus& v) {
    if (v.run == "running") {
        return {Adoption::Action::keep, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATED}, MigrationPhase::none,
                "its migration's Finish had resumed it here"};
    }
    return {Adoption::Action::end_incoming, {VIR_DOMAIN_SHUTOFF, VIR_DOMAIN_SHUTOFF_FAILED}, MigrationPhase::none,
            "it waited for an incoming migration whose Finish never resumed it: its vmm is ended, as libvirt's QEMU "
            "driver ends one after a restart (the source keeps the guest, and Confirm resumes it there)"};
}

Adoption outgoing(MigrationPhase phase, DomainState recorded, const VmmStatus& v) {
    bool completed = v.migration == "completed" && v.run == "postmigrate";
    if (completed && phase == MigrationPhase::outgoing) {
        return {Adoption::Action::resume_source, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATION_CANCELED},
                MigrationPhase::none,
                "its migration completed, but Perform's answer never reached the client, which then cancels the "
                "destination (Finish with 'cancelled') or never finishes it: the guest resumes here"};
    }
    if (completed) {
        return {Adoption::Action::hold, {VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION}, MigrationPhase::outgoing_done,
                "its migration completed and Perform answered, but Confirm never came: the destination may run the "
                "guest now, so it stays paused here. If the destination runs it, 'virsh destroy' it here; if not, "
                "resume it with vmmctl's 'cont -f' on its QMP socket"};
    }
    if (in_progress(v)) {
        return {Adoption::Action::cancel_outgoing, {VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATION_CANCELED},
                MigrationPhase::none, "its outgoing migration had nobody waiting for its end: cancelled, the guest runs on here"};
    }
    return {Adoption::Action::keep, as_it_runs(recorded, v), MigrationPhase::none, "its outgoing migration had ended"};
}

}  // namespace

Adoption decide_adoption(MigrationPhase phase, DomainState recorded, const VmmStatus& vmm) {
    if (in_postcopy(vmm)) return split(phase, vmm);
    switch (phase) {
        case MigrationPhase::incoming: return incoming(vmm);
        case MigrationPhase::outgoing:
        case MigrationPhase::outgoing_done: return outgoing(phase, recorded, vmm);
        case MigrationPhase::none: break;
    }
    if (vmm.run == "postmigrate") return outgoing(MigrationPhase::outgoing_done, recorded, vmm);
    return {Adoption::Action::keep, as_it_runs(recorded, vmm), MigrationPhase::none, ""};
}

}  // namespace vmmd
