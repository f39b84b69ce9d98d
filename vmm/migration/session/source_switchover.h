// Switchover: the hand-over of an outgoing migration (STATE, the destination's READY, GO) and,
// in a resumable precopy, GO as a commit: the destination's RUNNING, then DONE. Before GO a
// broken link is a precopy's (the guest runs here again: PrecopyResumption). From GO until
// RUNNING this side cannot know whether the guest runs there: it keeps its copy paused and asks
// the destination on a new connection what it holds, RUNNING (the migration is over), READY (GO
// never arrived: it goes again), for as long as x-resume-window allows; past it, the guest stays
// paused here with a line saying how to tell which side to run.
#pragma once

#include "vmm/migration/core/stats.h"
#include "vmm/migration/session/source_core.h"
#include "vmm/migration/session/source_resume.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class Switchover {
public:
    Switchover(SourceCore& core, PrecopyResumption& resumption) : core_(core), resumption_(resumption) {}

    // STATE and `last` (END, or POSTCOPY), then READY from the destination, then GO: the end of
    // the downtime. Returns the bytes of state sent.
    Result<uint64_t> hand_over(SourceRun& run, DowntimeParts& parts, RecordType last = RecordType::end);
    // GO went (or may have): the destination may run the guest.
    bool went_go() const { return went_go_; }
    // After GO: the destination's RUNNING, then DONE (a resumable precopy's).
    Status confirm_running(SourceRun& run);
    // The link broke after GO (`why`): the guest stays paused here until the destination says.
    Status settle_in_doubt(SourceRun& run, Error why);

private:
    // One try on a new connection; true: settled.
    Result<bool> ask_destination(const ResumeTo& to, SourceRun& run, Error& last);
    void cut_at(uint64_t step);  // x-switchover-cut

    SourceCore& core_;
    PrecopyResumption& resumption_;
    bool went_go_ = false;   // GO went (or may have)
    bool cut_done_ = false;  // x-switchover-cut has cut once
};

}  // namespace vmm::migration
