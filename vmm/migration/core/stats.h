// Migration statistics with QEMU's names (query-migrate), kept by whoever runs the migration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vmm/common/latency.h"
#include "vmm/migration/core/eta.h"
#include "vmm/migration/transport/setup_parts.h"

namespace vmm::migration {

// postcopy-active: the guest runs on the destination, which pulls the pages it still lacks;
// postcopy-paused: the link failed in postcopy, both sides keep their state for a recovery;
// postcopy-recover: a recovery is under way (QEMU's names).
// precopy-paused (ours): the link failed in precopy; the source's guest runs on, the
// destination keeps its pages, and the source reconnects (x-resume-window) to go on from there.
enum class MigrationStatus {
    none, setup, active, device, postcopy_active, postcopy_paused, postcopy_recover, completed, failed, cancelling,
    cancelled, precopy_paused
};
const char* to_string(MigrationStatus s);
bool is_terminal(MigrationStatus s);

struct RamStats {
    uint64_t transferred = 0;      // bytes that reached the destination, records included
    uint64_t in_flight = 0;        // sent, not yet known to have arrived (RDMA writes under way)
    uint64_t remaining = 0;        // bytes still dirty
    uint64_t total = 0;            // guest RAM size
    uint64_t duplicate = 0;        // zero pages, sent as markers
    uint64_t normal = 0;           // pages sent as data
    uint64_t normal_bytes = 0;
    double dirty_pages_rate = 0;   // pages/s dirtied during the last round
    double mbps = 0;               // measured, megabits/s
    uint64_t dirty_sync_count = 0;
    double pages_per_second = 0;
    uint64_t precopy_bytes = 0;    // sent while the guest ran
    uint64_t downtime_bytes = 0;   // sent while it was paused
    uint64_t skipped_unpopulated = 0;  // pages never touched, not even read
    // The bulk round: the populated bytes it has still to send (counted in pagemap at its start;
    // all of RAM without pagemap), what the time left is predicted from (eta.h)
    uint64_t bulk_to_send = 0;
    uint64_t populate_announced = 0;   // destination: bytes of runs the source announced (POPULATE)
    uint64_t populated_ahead = 0;      // destination: ... of which its helper populated before the data came
    uint64_t verified_bytes = 0;       // destination, verify-ram: page data checked against the source's XXH3
    bool verified_in_round = false;    // ... sums checked while the RAM channel's rounds ran (RDMA)
    uint64_t verified_after_round = 0; // ... of those, bytes still unchecked when their round ended
    uint64_t verify_mismatches = 0;    // ... records that did not match as they landed (sent again since, or fatal)
};

// One RAM round as the source measured it: round 0 is the bulk round, the last one ran with
// the vCPUs paused.
struct RoundStats {
    uint32_t round = 0;
    uint64_t bytes = 0;        // on the wire during the round
    double seconds = 0;
    uint64_t dirty_after = 0;  // pages dirty when it ended (0 for the paused round)
};

// Where the downtime went, in ms, from the pause until the destination may run: stopping the
// vCPUs and the last dirty sync; the paused round; saving and sending the vCPU and device
// state; the destination loading it (until READY); GO and postmigrate.
struct DowntimeParts {
    double pause = 0, last_round = 0, state = 0, destination = 0, go = 0;
};

using vmm::LatencySamples;  // vmm/common/latency.h
using vmm::LatencySummary;
using vmm::summarize;

// The postcopy phase. The source counts what it pushed and served; the destination what the
// guest (and the VMM's own reads of guest RAM) faulted on, and how long each fault waited.
struct PostcopyStats {
    bool switched = false;
    uint64_t switch_ms = 0;         // source: from the pause to GO (the guest ran nowhere)
    uint64_t missing_pages = 0;     // pages the destination lacked at the switch (stale or unsent)
    uint64_t background_pages = 0;  // source: pushed in order; destination: placed from them
    uint64_t requests = 0;          // page requests (destination: sent; source: received)
    uint64_t requests_served = 0;   // source: requested pages sent ahead of the background
    uint64_t already_sent = 0;      // source: requests for pages already on their way (requests - served)
    uint64_t zero_local = 0;        // destination: faults on pages known to be zero, placed without asking
    uint64_t placed = 0;            // destination: missing pages placed so far
    uint64_t readahead_pages = 0;   // source: pushed at once past requests in order (of background_pages)
    uint64_t resent_pages = 0;      // source: requested pages sent already, sent again on the preempt connection
    uint64_t preempt_pages = 0;     // postcopy-preempt: pages sent (source) / placed (destination) on its connection
    uint64_t postcopy_bytes = 0;    // source: bytes sent after the switch
    uint64_t recoveries = 0;        // times a broken link was recovered (migrate_recover, migrate -r)
    uint64_t held_pages = 0;        // source: pages the destination read itself (RDMA READ) and said it holds, or
                                    // (a transport whose destination reads the push) left for it to read
    double return_cpu_ms = 0;       // source: CPU time its return-path threads used (reading and answering requests)
    double source_cpu_ms = 0;       // source: its whole process's CPU time while postcopy ran (each connection's)
    double ready_ms = 0;            // a lazy restore's destination: from its start until the guest could run
    LatencySummary fault_latency;   // destination: a request sent until its page was placed
    LatencySummary serve_latency;   // source: a request read until its pages were written (or sent again)
    double blocktime_ms = 0;        // destination: time every vCPU was blocked at once (QEMU's postcopy-blocktime)
    std::vector<double> vcpu_blocktime_ms;  // destination: per vCPU, summed over its faults
};

struct MigrationStats {
    MigrationStatus status = MigrationStatus::none;
    std::string error;             // why it failed
    std::string uri;
    uint64_t total_time_ms = 0;
    uint64_t setup_time_ms = 0;
    std::vector<SetupPart> setup_parts;  // where setup_time_ms went (a destination: its own steps)
    uint64_t expected_downtime_ms = 0;  // the RAM left at the measured bandwidth + the hand-over
    double handover_estimate_ms = 0;    // the destination's rehearsal of saving and loading the state
    uint64_t downtime_ms = 0;      // VMM-measured: vCPUs paused until the destination may run
    DowntimeParts downtime_parts;  // with a completed migration
    uint32_t rounds = 0;
    uint32_t cpu_throttle_percentage = 0;
    RamStats ram;
    std::vector<RoundStats> round_log;  // the first kRoundLogMax rounds
    PostcopyStats postcopy;             // once the migration switched to postcopy
    std::optional<uint64_t> tls_key_updates;  // over TLS: the main connection's key renewals so far
    uint32_t stalls = 0;            // x-stall-timeout passed with no progress (progress_watch.h)
    uint32_t precopy_resumes = 0;   // times a broken precopy link was resumed (x-resume-window)
    double precopy_paused_ms = 0;   // time spent in precopy-paused, all pauses
    uint64_t resent_pages = 0;      // source: pages sent again at resumes (what did not arrive whole)
    // Source: the ways RAM went, in order, when a resumption took another (x-fallback-uri,
    // migrate -r): each URI and the bytes that went over it.
    struct Way {
        std::string uri;
        uint64_t bytes = 0;
    };
    std::vector<Way> ways;
    // Source, active or postcopy-active: the time left as predicted now (eta.h), none until a
    // byte has moved; and the rates the prediction came from.
    std::optional<Eta> eta;
    double eta_link_bytes_per_s = 0;
    double eta_dirty_bytes_per_s = 0;
};

inline constexpr size_t kRoundLogMax = 1000;

// A precopy that stalled (x-stall-timeout): what the X_MIGRATION_STALLED event says.
struct StallReport {
    uint64_t lowest_remaining = 0;  // bytes: the least left so far, not reached again since
    std::string what;               // "no progress for 30.0 s: ..."
    std::string action;             // what x-deadline-strategy does: cancel, postcopy, downtime, throttle
};


}  // namespace vmm::migration
