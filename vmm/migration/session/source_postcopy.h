// PostcopyPhase: an outgoing migration's postcopy (postcopy-ram). It owns when the switch comes
// (migrate_start_postcopy, x-postcopy-after-rounds, x-deadline's postcopy), the switch itself
// (vCPUs paused, DISCARD for what the destination lacks, the hand-over with POSTCOPY), the
// request-first sender that then serves the missing pages while the guest runs there, and the
// recovery of a link that broke (postcopy-paused, migrate -r, postcopy-recover).
#pragma once

#include <atomic>
#include <chrono>

#include "vmm/migration/core/stats.h"
#include "vmm/migration/session/source_core.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/session/source_switchover.h"

namespace vmm::migration {

class PostcopySender;

class PostcopyPhase {
public:
    PostcopyPhase(SourceCore& core, Switchover& switchover) : core_(core), switchover_(switchover) {}

    // migrate_start_postcopy: switch now, the round under way stopping after the piece it is
    // sending (postcopy-ram must have been on when the migration started).
    Status start();
    // The same, asked by the migration itself (x-deadline's postcopy strategy).
    void switch_soon() { requested_ = true; }
    bool requested() const { return requested_; }
    // At the end of precopy round `round`: whether the switch comes now (it then does).
    bool due_after(uint32_t round);
    bool switching() const { return switching_; }
    // GO went in postcopy: the destination runs the guest.
    bool went() const { return went_; }
    // The switch, then the pages until the destination has all of them.
    Status run(SourceRun& run);
    // The postcopy's figures and time left into `s` (under core.mutex).
    void report(MigrationStats& s) const;

private:
    // Runs of the pages the destination must drop and fetch again: dirty since they were sent.
    Status send_discards(stream::ByteStream& st, const SourceCore::Bitmaps& bitmaps);
    // postcopy-paused until migrate -r brings a link that works; an error when the postcopy
    // cannot go on (the guest was forced to run here).
    Status recover_link(PostcopySender& sender, Error why);
    Result<ResumeTo> await_resume();
    Status reconnect(const ResumeTo& to, PostcopySender& sender);

    SourceCore& core_;
    Switchover& switchover_;
    std::atomic<bool> requested_{false};
    bool switching_ = false;                             // precopy ended to switch to postcopy
    bool went_ = false;                                  // GO sent in postcopy
    PostcopySender* sender_ = nullptr;                   // under core.mutex, while the postcopy phase runs
    std::chrono::steady_clock::time_point switched_at_;  // under core.mutex: when the postcopy push began
};

}  // namespace vmm::migration
