// What every phase of an outgoing migration shares (MigrationSource and the phases it is made
// of: PrecopyResumption, Switchover, PostcopyPhase, DeadlineKeeper): the machine, the settings
// as they were at `migrate`, the connection and the statistics the monitors read, under one
// mutex. Private to the session.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "vmm/machine/machine.h"
#include "vmm/migration/core/eta.h"
#include "vmm/migration/core/live_settings.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/transport/options.h"
#include "vmm/migration/transport/transport.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/stream/cancel.h"

namespace vmm::migration {

// Why `cont` is refused on a source whose migration completed (postmigrate): the destination
// runs the guest, and resuming it here would run a second copy of it (QEMU allows that; we
// ask for `cont -f`, as in postcopy-paused).
inline constexpr const char* kMovedAway =
    "the migration completed: the guest runs on the destination now, and resuming it here would run a second copy "
    "('cont -f' forces it)";

// How often a source whose link broke tries again (a resumption, or asking after GO).
inline constexpr auto kReconnectEvery = std::chrono::milliseconds(100);

// Where a resumption goes: the URI 'migrate -r' named, or the migration's own.
struct ResumeTo {
    Transport* transport;
    Uri uri;
    bool fallback = false;  // x-fallback-uri's way: a refusal there does not end the migration
};

struct SourceCore {
    using StatusFn = std::function<void(MigrationStatus)>;
    using StallFn = std::function<void(const StallReport&)>;
    using Bitmaps = std::vector<std::vector<uint64_t>>;

    SourceCore(machine::Machine& m, Transport& t, Uri u, Options o, std::shared_ptr<const LiveSettings> l,
               stream::CancelToken c, StatusFn s);

    machine::Machine& machine;
    Transport* transport;  // the migration thread's, with uri: a resumption over another way changes both
    Uri uri;
    Options options;   // downtime-limit under mutex (x-deadline raises it while stats() reads it)
    std::shared_ptr<const LiveSettings> live;
    stream::CancelToken cancel;
    StatusFn on_status;
    StallFn on_stall;  // x-stall-timeout passed (with the events capability)
    std::chrono::steady_clock::time_point start;  // when the command came
    bool was_running = false;   // the guest ran when the migration began
    bool paused_by_us = false;  // the migration paused the guest: a failure resumes it
    bool dirty_limited = false;  // x-deadline-strategy dirty-limit limited the vCPUs (migration thread only)
    PageSummer summer;          // the sums' function: keyed MACs when the connection is authenticated
    RamSaver::Verify verify = RamSaver::Verify::off;  // decided with the header, again for a resumption's connection
    // The header asked the destination to answer each channel round once it landed (kFeatureRoundLanded).
    bool round_landed = false;
    std::optional<ResumeTo> fallback;                 // x-fallback-uri, resolved when the migration began

    mutable std::mutex mutex;
    MigrationStats stats;                                   // under mutex
    std::unique_ptr<Connection> conn;                       // under mutex (the migration thread reads it freely)
    std::vector<std::unique_ptr<Connection>> broken;        // under mutex: links that broke (a Run may refer to one)
    std::optional<ResumeTo> resume_to;                      // under mutex: migrate -r asked
    std::condition_variable resume_cv;                      // resume_to set, or time to look again
    std::chrono::steady_clock::time_point active_since;     // under mutex: when the first round began
    std::chrono::steady_clock::time_point published_at;     // under mutex: the RAM figures' last publish
    uint64_t way_began_at = 0;                              // under mutex: bytes sent when the current way began

    // Whether pages go with their sums (the header's kFeatureVerifyRam): verify-ram, or an
    // authenticated connection, which turns them on by itself; postcopy's too.
    bool sums_on() const { return options.caps.verify_ram || summer.keyed(); }
    void set_status(MigrationStatus s);
    void publish(const RamStats& work);
    void update_remaining(uint64_t dirty_pages);
    Result<Bitmaps> take_dirty();
    // The guest back to running, unthrottled, if this migration paused it.
    void give_guest_back();
    // Auto-converge's throttle off, and the vCPU dirty limits x-deadline set lifted.
    void release_throttles();
    // The live connection cut and kept aside (a Run may still refer to it) with `why` shown.
    void set_link_aside(std::string why);
    // Where the next try goes: the URI 'migrate -r' named last (`asked`), else the migration's own,
    // or its fallback when it is `fallback_turn`.
    ResumeTo next_way(bool& asked, bool fallback_turn = false);
    // How RAM is verified over `c`: inline records carry their sums; a RAM channel either sums
    // its own records (multifd lanes), or the saver sums what it hands it: for the channel to
    // carry as the pages land (RDMA with our extension), or else for the stream after the
    // channel's round. Authenticated (tls-creds over rdma:), every page goes with its MAC.
    RamSaver::Verify verify_for(Connection& c) const;
    // The ways RAM went (stats.ways): `uri` from now on, `sent` bytes sent so far in all.
    void new_way(const std::string& uri, uint64_t sent);
    void count_way(uint64_t sent);  // the current way's bytes, `sent` so far in all
    // Between two tries: kReconnectEvery, or less if 'migrate -r' names a way meanwhile.
    void wait_before_next_try();
    // A broken link settled (paused since `since`): counted, and what it left behind goes.
    void link_back(std::chrono::steady_clock::time_point since);
    // Precopy's plan as measured now, from `s` (stats under mutex, or a copy of it).
    EtaFacts precopy_facts(const MigrationStats& s) const;
};

// The pages of each of `mem`'s blocks.
std::vector<uint64_t> pages_per_block(const memory::GuestMemory& mem);

}  // namespace vmm::migration
