// MigrationSource: one outgoing migration, on its own thread.
//
//   setup     connect, send the header, wait for the destination to accept it
//   active    bulk round (populated pages), then dirty rounds until the rest fits in
//             downtime-limit at the measured bandwidth (auto-converge throttles the vCPUs
//             when rounds stop shrinking)
//   device    vCPUs paused: last dirty round, vCPU + device state, END; wait for READY;
//             send GO -> completed, and the source stays paused (postmigrate)
//   failed / cancelled: the source resumes if it was running, and says why
// With postcopy-ram (source_postcopy.cc) precopy may end early: the switch hands the guest over
// with pages missing, then postcopy-active serves them; a broken link gives postcopy-paused,
// and 'migrate -r URI' (resume) postcopy-recover, then postcopy-active again.
// Over tcp/unix with x-resume-window (source_resume.cc), a precopy whose link breaks goes to
// precopy-paused instead of failing: the guest runs on, the source reconnects (to the same URI,
// or the one 'migrate -r' names) and sends only what the destination lacks; past the window it
// fails as before.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <optional>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "vmm/machine/machine.h"
#include "vmm/stream/cancel.h"
#include "vmm/migration/transport/options.h"
#include "vmm/migration/precopy/convergence.h"
#include "vmm/migration/precopy/deadline.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/precopy/resume.h"
#include "vmm/migration/core/live_settings.h"
#include "vmm/migration/core/rate_limiter.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/transport/transport.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

// Why `cont` is refused on a source whose migration completed (postmigrate): the destination
// runs the guest, and resuming it here would run a second copy of it (QEMU allows that; we
// ask for `cont -f`, as in postcopy-paused).
inline constexpr const char* kMovedAway =
    "the migration completed: the guest runs on the destination now, and resuming it here would run a second copy "
    "('cont -f' forces it)";

class MigrationSource {
public:
    using StatusFn = std::function<void(MigrationStatus)>;

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
    Status start_postcopy();
    // migrate -r: resume the paused postcopy over a new connection to `uri` (the destination
    // must be listening there after migrate_recover). Asynchronous, as the migration itself.
    // A paused precopy (precopy-paused) tries `uri` from then on instead of its own.
    Status resume(Transport& transport, Uri uri);
    // migrate_pause: cut the link of the postcopy (or resumable precopy) under way, as a failed
    // network would.
    Status pause_link();
    MigrationStats stats() const;
    bool finished() const;
    // The last file save this vmm completed, nothing having taken its dirty log since: the only
    // save an incremental one (file-base) may build on. Before start().
    void set_last_save(std::optional<uint64_t> id) { last_save_ = id; }
    // This migration's save id, once it completed a save to a file.
    std::optional<uint64_t> saved_id() const {
        uint64_t id = saved_id_;
        return id != 0 ? std::optional(id) : std::nullopt;
    }

private:
    struct Run;  // what the rounds share: working stats, rate limiter, RAM saver
    void run();
    Status setup(Connection*& conn_out);
    Result<uint32_t> negotiate();
    Status check_connection() const;
    Status precopy(Run& run);
    Status first_round(Run& run);
    Status complete(Run& run);
    Result<uint32_t> header_answer(stream::ByteStream& st);  // HEADER_OK's hand-over estimate
    Status saved(Run& run);  // a file's commit, the guest running on
    // The switch: vCPUs paused, DISCARD for what the destination lacks, the hand-over with
    // POSTCOPY; then the missing pages, requested ones first, while the guest runs there.
    Status postcopy(Run& run);
    bool switch_now(uint32_t round) const;
    struct ResumeTo {
        Transport* transport;
        Uri uri;
    };
    // The link broke in postcopy (`why`): postcopy-paused until migrate -r brings a link that
    // works; an error when the postcopy cannot go on (the guest was forced to run here).
    Status recover_link(class PostcopySender& sender, Error why);
    Result<ResumeTo> await_resume();
    Status reconnect(const ResumeTo& to, class PostcopySender& sender);
    Status send_discards(stream::ByteStream& st, const std::vector<std::vector<uint64_t>>& bitmaps);
    // Precopy across a broken link (source_resume.cc).
    bool can_resume() const;                      // decided once, before the header goes
    bool link_broke_in_precopy(const Run& run) const;
    Status ride_out(Run& run, Error why);         // precopy-paused until a new link works, or the window ends
    // One try: the resuming header and SESSION, the destination's rounds, what to send again.
    // Result false: worth trying again; an error: the migration cannot go on.
    Result<bool> reconnect_precopy(const ResumeTo& to, Run& run, Error& last);
    Status send_session(stream::ByteStream& st, uint32_t window_ms);
    // A resumption's first words: the header with kFeaturePrecopyResume, then SESSION.
    Status send_resuming_header(stream::ByteStream& st, uint32_t window_ms);
    // Where the next try goes: the URI 'migrate -r' named last (`asked`), else the migration's own.
    ResumeTo next_way(bool& asked);
    void say_goodbye();                           // SESSION with window 0: the destination stops waiting
    // The switchover as a commit (source_switchover.cc, resumable precopy only): after GO, the
    // destination's RUNNING, then DONE; a link that breaks before RUNNING leaves this side in doubt,
    // its guest paused, until a resumption tells what the destination holds.
    Status confirm_running(Run& run);
    Status settle_in_doubt(Run& run, Error why);
    Result<bool> ask_destination(const ResumeTo& to, Run& run, Error& last);  // true: settled
    // A resumption's connection, its header and SESSION sent and HEADER_OK read: none when this
    // try failed in a way worth another (`last` says how); an error when the destination refused.
    Result<std::unique_ptr<Connection>> open_resumption(const ResumeTo& to, Error& last);
    void cut_at(uint64_t step);  // x-switchover-cut
    // The dirty bitmaps for `round` (its pages' contents go in it: SentRounds).
    Result<std::vector<std::vector<uint64_t>>> take_for_round(uint32_t round);
    // STATE and `last` (END, or POSTCOPY), then READY from the destination, then GO: the end
    // of the downtime. Returns the bytes of state sent.
    Result<uint64_t> hand_over(Run& run, DowntimeParts& parts, RecordType last = RecordType::end);
    void publish(const RamStats& work);
    Result<std::vector<std::vector<uint64_t>>> take_dirty();
    void set_status(MigrationStatus s);
    void fail(const Error& e);
    void update_remaining(uint64_t dirty_pages);
    void predict(MigrationStats& s) const;  // the time left, into s.eta (under mutex_)
    EtaFacts precopy_facts(const MigrationStats& s) const;  // precopy's plan as measured now (under mutex_)
    // x-deadline (source_deadline.cc, precopy/deadline.h): the facts for the plan `eta`; during a
    // round, a cancel or a switch at once when the plan misses it; at a round's end, also a higher
    // downtime-limit or a throttle step (into `d`).
    DeadlineFacts deadline_facts(const EtaFacts& eta, const Convergence* conv) const;
    void watch_deadline();
    Status keep_deadline(Convergence& conv, Decision& d, uint64_t dirty_bytes);

    machine::Machine& machine_;
    Transport& transport_;
    Uri uri_;
    Options options_;
    std::shared_ptr<const LiveSettings> live_;
    RamSaver::Verify verify_mode() const;  // how this migration's RAM is verified, from its options
    RamSaver::Verify verify_ = RamSaver::Verify::off;  // verify_mode(), decided once with the header
    PageSummer summer_;  // the sums' function: keyed MACs when the connection is authenticated
    // Whether pages go with their sums (the header's kFeatureVerifyRam): verify-ram, or an
    // authenticated connection, which turns them on by itself; postcopy's too, a recovery's included.
    bool sums_on() const { return options_.caps.verify_ram || summer_.keyed(); }
    stream::CancelToken cancel_;
    StatusFn on_status_;
    mutable std::mutex mutex_;
    MigrationStats stats_;
    std::unique_ptr<Connection> conn_;
    std::chrono::steady_clock::time_point start_;
    bool was_running_ = false;
    bool paused_by_us_ = false;
    std::atomic<bool> finished_{false};
    std::atomic<bool> postcopy_requested_{false};
    bool switching_ = false;                      // precopy ended to switch to postcopy
    bool went_postcopy_ = false;                  // GO sent in postcopy: the destination runs the guest
    std::optional<uint64_t> last_save_;           // set_last_save()
    std::atomic<uint64_t> saved_id_{0};           // saved_id()
    class PostcopySender* sender_ = nullptr;      // under mutex_, while the postcopy phase runs
    std::chrono::steady_clock::time_point switched_at_;  // under mutex_: when the postcopy push began
    std::chrono::steady_clock::time_point active_since_;  // under mutex_: when the first round began
    std::chrono::steady_clock::time_point published_at_;  // under mutex_: the RAM figures' last publish
    std::optional<ResumeTo> resume_to_;           // under mutex_: migrate -r asked
    std::condition_variable resume_cv_;
    std::vector<std::unique_ptr<Connection>> broken_;  // links that broke in postcopy (Run refers to the first)
    uint32_t header_features_ = 0;                // what the first header announced
    std::atomic<uint64_t> session_id_{0};         // nonzero: resumable (kFeatureResumable)
    std::optional<SentRounds> sent_rounds_;       // with session_id_
    std::atomic<bool> answered_{false};           // the destination accepted the first header
    bool went_go_ = false;                        // GO went (or may have): the destination may run the guest
    std::string broke_because_;                   // the last break's error (the migration thread's)
    uint64_t resent_now_ = 0;                     // pages the last resumption sends again
    bool cut_done_ = false;                       // x-switchover-cut has cut once
    uint64_t deadline_ms_ = 0;                    // x-deadline, parsed (0: none)
    std::optional<Error> deadline_failure_;       // the plan missed x-deadline under its cancel: why
    std::chrono::steady_clock::time_point deadline_checked_;  // watch_deadline's last look
    std::thread thread_;
};

}  // namespace vmm::migration
