// What a restarted vmmd does with a vmm an earlier vmmd left running, decided from the run
// record's migration phase and what the vmm itself says (query-status, query-migrate). The rule
// that decides is vmmd's first invariant (docs/libvirt.md, "One guest, one copy"): a domain's
// guest runs in one place, or is held paused until a person says where, across a crash of either
// vmmd at any step of a migration. Pure: the Supervisor carries the decision out.
#pragma once

#include <string>

#include "vmmd/domain/domain_store.h"
#include "vmmd/runtime/run_record.h"

namespace vmmd {

// The vmm as it answered: its run status ("running", "paused", "inmigrate", "postmigrate", …)
// and its migration's ("" when it has none, "active", "completed", "postcopy-paused", …).
struct VmmStatus {
    std::string run;
    std::string migration;
};

struct Adoption {
    enum class Action {
        keep,             // drive it on, in `state`
        end_incoming,     // an incoming migration its Finish never resumed: end the vmm
        cancel_outgoing,  // an outgoing migration nobody waits for: cancel it (the guest runs on here)
        resume_source,    // a completed outgoing migration whose Perform never answered: resume here
        hold,             // a completed outgoing migration whose Confirm never came: stay paused
    } action = Action::keep;
    DomainState state;            // the state the domain is shown in after the action
    MigrationPhase phase = MigrationPhase::none;  // the phase recorded after it
    std::string why;              // one line for the log ("" for a plain keep)
};

Adoption decide_adoption(MigrationPhase phase, DomainState recorded, const VmmStatus& vmm);

}  // namespace vmmd
