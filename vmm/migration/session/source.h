// MigrationSource: one outgoing migration, on its own thread.
//
//   setup     connect, send the header, wait for the destination to accept it
//   active    bulk round (populated pages), then dirty rounds until the rest fits in
//             downtime-limit at the measured bandwidth (auto-converge throttles the vCPUs
//             when rounds stop shrinking)
//   device    vCPUs paused: last dirty round, vCPU + device state, END; wait for READY;
//             send GO -> completed, and the source stays paused (postmigrate)
//   failed / cancelled: the source resumes if it was running, and says why
// The phases it is made of, each a class owning its own state, share a SourceCore (the machine,
// the settings, the connection, the statistics): the hand-over and GO as a commit (Switchover);
// with postcopy-ram the switch and what follows (PostcopyPhase: postcopy-active, -paused,
// -recover); over tcp/unix with x-resume-window a precopy that rides out a broken link
// (PrecopyResumption: precopy-paused, then only what the destination lacks); x-deadline
// (DeadlineKeeper).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "vmm/migration/session/source_core.h"
#include "vmm/migration/session/source_deadline.h"
#include "vmm/migration/session/source_postcopy.h"
#include "vmm/migration/session/source_resume.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/session/source_switchover.h"

namespace vmm::migration {

class MigrationSource {
public:
    using StatusFn = SourceCore::StatusFn;

    // `options`: the settings as they are at `migrate`; `live`: the live rows as they change
    // (max-bandwidth paces the rounds still to come, not the paused guest's last one;
    // max-postcopy-bandwidth and x-postcopy-readahead the postcopy push, as in QEMU).
    MigrationSource(machine::Machine& m, Transport& transport, Uri uri, Options options,
                    std::shared_ptr<const LiveSettings> live, stream::CancelToken cancel,
                    StatusFn on_status);
    ~MigrationSource();  // cancels and joins
    MigrationSource(const MigrationSource&) = delete;
    MigrationSource& operator=(const MigrationSource&) = delete;

    // Runs the migration on its own thread; its total time counts from `asked` (when the
    // command came, before the transport was loaded).
    void start(std::chrono::steady_clock::time_point asked);
    void cancel();
    // migrate_start_postcopy: switch to postcopy now, the round under way stopping after the
    // piece it is sending (postcopy-ram must have been on when the migration started).
    Status start_postcopy() { return postcopy_.start(); }
    // migrate -r: resume the paused postcopy over a new connection to `uri` (the destination
    // must be listening there after migrate_recover). Asynchronous, as the migration itself.
    // A paused precopy (precopy-paused) tries `uri` from then on instead of its own.
    Status resume(Transport& transport, Uri uri);
    // migrate_pause: cut the link of the postcopy (or resumable precopy) under way, as a failed
    // network would.
    Status pause_link();
    MigrationStats stats() const;
    bool finished() const { return finished_; }
    // The last file save this vmm completed, nothing having taken its dirty log since: the only
    // save an incremental one (file-base) may build on. Before start().
    void set_last_save(std::optional<uint64_t> id) { last_save_ = id; }
    // x-fallback-uri's way, before start().
    void set_fallback(ResumeTo way) { core_.fallback = std::move(way); }
    // Told when the precopy stalls (x-stall-timeout), with the events capability. Before start().
    void set_on_stall(SourceCore::StallFn fn) { core_.on_stall = std::move(fn); }
    // This migration's save id, once it completed a save to a file.
    std::optional<uint64_t> saved_id() const {
        uint64_t id = saved_id_;
        return id != 0 ? std::optional(id) : std::nullopt;
    }

private:
    void run();
    Status setup(Connection*& conn_out);
    Result<uint32_t> negotiate();
    Status check_connection() const;
    Result<uint32_t> header_answer(stream::ByteStream& st);  // HEADER_OK's hand-over estimate
    Status precopy(SourceRun& run);
    Status first_round(SourceRun& run);
    // The rounds' figures after round run.round: `sent` bytes in `secs`, `dirty` pages left.
    void after_round(const SourceRun& run, const Decision& d, uint64_t sent, double secs, uint64_t dirty);
    Status complete(SourceRun& run);
    Status saved(SourceRun& run);  // a file's commit, the guest running on
    void fail(const Error& e);

    SourceCore core_;
    PrecopyResumption resumption_{core_};
    Switchover switchover_{core_, resumption_};
    PostcopyPhase postcopy_{core_, switchover_};
    DeadlineKeeper deadline_{core_, postcopy_};
    std::atomic<bool> finished_{false};
    std::optional<uint64_t> last_save_;  // set_last_save()
    std::atomic<uint64_t> saved_id_{0};  // saved_id()
    std::thread thread_;
};

}  // namespace vmm::migration
