// x-stall-timeout: a precopy that makes no progress. Progress is the data left to send reaching a
// new low (KubeVirt's progressTimeout reads libvirt's "data remaining" the same way): a guest that
// dirties as fast as the link moves keeps it on a plateau, and a link that stopped keeps it
// where it was. When the lowest has not dropped for the timeout the migration has stalled: the
// source says so (QMP X_MIGRATION_STALLED, info migrate) and x-deadline-strategy acts, as for a
// deadline the plan misses. Pure decisions, apart from any I/O, so they are tested alone.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/migration/precopy/deadline.h"

namespace vmm::migration {

class ProgressWatch {
public:
    explicit ProgressWatch(uint64_t timeout_ms) : timeout_ms_(timeout_ms) {}

    // `remaining` bytes left, measured `now_ms` after the migration began: true once the lowest
    // so far is that old (again only after a new low, or `restart`).
    bool stalled(uint64_t remaining, double now_ms);
    // After a strategy acted (a throttle step, a higher downtime-limit): a new stall is counted
    // from `now_ms`.
    void restart(double now_ms);
    bool on() const { return timeout_ms_ != 0; }
    uint64_t lowest() const { return lowest_; }
    // "no progress for 30.0 s: 812.0 MiB left, its lowest 790.0 MiB at 12.1 s"
    std::string describe(uint64_t remaining, double now_ms) const;

private:
    uint64_t timeout_ms_;
    uint64_t lowest_ = UINT64_MAX;
    double lowest_at_ms_ = 0;
    bool said_ = false;  // this stall was reported
};

// What x-deadline-strategy does about a stall (`what`: the watch's describe()): cancel, saying
// why; switch to postcopy; raise downtime-limit as little as lets precopy end at these rates (up to
// x-deadline-max-downtime); or a throttle step; one that cannot cancels, saying so. `f.deadline_ms`
// is not read.
DeadlineAction stall_action(const DeadlineFacts& f, const std::string& what);

}  // namespace vmm::migration
