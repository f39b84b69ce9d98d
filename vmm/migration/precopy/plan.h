// The plan before a migration (`info migrate-plan`): for each way vmm can migrate this guest now,
// whether it ends, when, with what downtime, what it sends and what it costs the guest, from the
// rates measured here (the guest's dirtying over the last seconds, the link's rate given or known).
// Pure: the rounds are followed on paper with the same Convergence the round loop decides with.
//
// The guest's dirtying: `bytes_per_s` distinct bytes a second (the sampler's periods), the same
// over a tenth of a period (`fast_bytes_per_s`: a hot set rewritten several times a period is all
// dirty again after a short round, which a period's count cannot show), and a hot set when there
// is one: the pages the guest keeps rewriting, where its working set stops growing as the window
// doubles up to 32 periods (memory::DirtyRate::hot_set_pages, memory::choose_working_set); no
// round's dirt exceeds them. A guest that writes new pages all the time has none (each round's
// dirt grows with its length, up to the RAM).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vmm/migration/transport/options.h"

namespace vmm::migration {

struct DirtyModel {
    double bytes_per_s = 0;
    double hot_bytes = 0;   // 0: no hot set (streaming writes); bounded by the RAM then
    double ram_bytes = 0;
    double fast_bytes_per_s = 0;  // over short rounds; the faster of the two rates counts
    // What a round of `seconds` leaves dirty with the vCPUs throttled by `throttle_percent`.
    double after(double seconds, uint32_t throttle_percent = 0) const;
};

struct PlanFacts {
    uint64_t populated_bytes = 0;  // the bulk round's (pages never touched cost nothing)
    DirtyModel dirty;
    double link_bytes_per_s = 0;
    double postcopy_bytes_per_s = 0;  // the push after the switch (max-postcopy-bandwidth), 0: the link's
    double handover_ms = 0;           // saving and loading the state
    Parameters params;                // downtime-limit, the throttle's steps
    // Each vCPU's dirty rate over the window, bytes/s (the dirty ring counts them; empty with the
    // dirty log, where the guest counts as one whole): which vCPUs a dirty limit holds.
    std::vector<double> vcpu_bytes_per_s;
    uint64_t deadline_ms = 0;         // x-deadline, 0: none (the dirty limit then aims at half the link)
};

enum class PlanStrategy { precopy, auto_converge, dirty_limit, one_pause, postcopy_after_round, postcopy_now };
const char* to_string(PlanStrategy s);  // "precopy", "precopy + auto-converge", …

struct PlanRow {
    PlanStrategy strategy = PlanStrategy::precopy;
    bool converges = false;
    double total_ms = 0;           // from migrate to the guest running there (when it ends)
    double downtime_ms = 0;
    double sent_bytes = 0;         // until the end; until it gave up when it does not end
    uint32_t rounds = 0;           // precopy's rounds, the bulk round included
    double throttled_ms = 0;       // the time each vCPU is made to sleep (auto-converge)
    uint32_t throttle_percent = 0; // its highest step (dirty limit: the most held vCPU's)
    double blocked_ms_at_most = 0; // postcopy: until the last missing page has arrived
    uint64_t pause_limit_ms = 0;   // one pause: the downtime-limit it needs (its cost is the downtime)
    // dirty limit: each vCPU's limit (bytes/s; 0 when none is needed) and how many it holds back
    double vcpu_limit_bytes_per_s = 0;
    uint32_t limited_vcpus = 0;
    std::string why_no_end;        // when it does not end: at what rates, and what would end it
};

// The dirty limit (x-deadline-strategy dirty-limit, or set_vcpu_dirty_limit by hand) holds the
// guest from the start to a dirty rate: with x-deadline none when precopy meets it as it is, else
// the strategy's own choice (highest_dirty_rate: the highest rate whose precopy meets it, times
// kDirtyLimitMargin); without one, half the link's rate (each round
// then at most half the one before). One limit for every vCPU: those under it run free, those
// over it are held to it (machine::common_cap). Its cost is each held vCPU's throttle, averaged
// over the vCPUs as auto-converge's is (every vCPU sleeps there).
// One pause (x-deadline-strategy downtime, or downtime-limit raised by hand) is precopy with
// downtime-limit raised as little as ends it; with x-deadline, as little as ends it within
// kDowntimeMargin of the deadline, or else by the deadline, as the strategy aims. Its cost is that
// pause, the guest stopped while the last round crosses the link; it costs less than a throttle
// where the guest dirties faster than the link moves (docs/performance.md, "Deadlines").
// One row a strategy, in PlanStrategy's order. The link's rate must be above 0.
std::vector<PlanRow> plan_migration(const PlanFacts& f);

}  // namespace vmm::migration
