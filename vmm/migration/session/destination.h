// IncomingMigration: the destination side. listen() binds at once (so a busy port is reported
// at start-up); start() accepts the source on a thread, checks its header against this machine,
// loads RAM and state, answers READY, and on GO runs the guest (or leaves it paused with -S).
// Any failure calls on_failure with one line; the process then exits non-zero, except in
// postcopy: the guest runs here then, so a broken link leaves it waiting (postcopy-paused) for
// migrate_recover and the source's 'migrate -r'. A precopy whose source announced it resumes
// (x-resume-window) waits likewise when its link breaks (precopy-paused, destination_resume.cc),
// keeping every page that arrived, for the source to come back within its window.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "vmm/machine/machine.h"
#include "vmm/stream/cancel.h"
#include "vmm/migration/core/stats.h"
#include "vmm/migration/postcopy/lazy_restore.h"
#include "vmm/migration/postcopy/receiver.h"
#include "vmm/migration/session/mapped_guard.h"
#include "vmm/migration/precopy/ram_loader.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/transport/transport.h"

namespace vmm::migration {

class IncomingMigration {
public:
    using StatusFn = std::function<void(MigrationStatus)>;
    using FailFn = std::function<void(const Error&)>;

    using SettingsFn = std::function<Options()>;

    // `settings` gives the monitor's settings as they are now: read when the source connects
    // (and by the transport's listener as it accepts), not when this starts to listen.
    IncomingMigration(machine::Machine& m, Transport& transport, Uri uri, SettingsFn settings, stream::CancelToken cancel,
                      bool stay_paused, StatusFn on_status, FailFn on_failure);
    ~IncomingMigration();  // out of line: PostcopyReceiver is complete there

    Status listen();
    void start();
    void cancel();
    MigrationStats stats() const;
    // This side's setup step by step (mutex_ held): the transport's accept from the source's
    // first word on, the header checked and answered (the hand-over rehearsed), and what the
    // transport answered while the stream was read (rdma: the RAM blocks, pinned under
    // rdma-pin-all). A transport that reports no steps shows the header alone.
    std::vector<SetupPart> setup_parts_of(const Connection& conn) const;
    // Listening, no source yet, on a transport that took the settings when it started listening:
    // a change made now would be shown but not used.
    bool waits_with_settings_taken() const;
    // Whether it waits for its source on a transport that carries no TLS (tls-creds cannot apply).
    bool waits_without_tls() const;
    // migrate_recover: the postcopy whose link broke waits for the source's 'migrate -r' on `uri`.
    // Again while it waits (a URI the source cannot reach): the new one takes the old one's place.
    Status recover(Transport& transport, Uri uri);
    // migrate_pause: cut the link of the postcopy under way, as a failed network would.
    Status pause_link();

private:
    void run();
    void run_recovery();
    // The recovery waiting for the source stops listening (it has not come: live_ is null).
    Status stop_waiting();
    // The connection is done with (`s`: how it ended): it and the listener go, and the status says what follows.
    void end_connection(Status s, std::unique_ptr<Connection> conn);
    // REFUSED with the reason, best effort: the source learns why (the connection may be gone).
    static void refuse(stream::ByteStream& st, const Error& e);
    Status resume(Connection& conn);
    Status receive(std::unique_ptr<Connection>& conn);
    // Precopy across a broken link (destination_resume.cc): reads the SESSION record of a
    // resumable source's header; waits in precopy-paused for the source's new connection, which
    // replaces `conn`; checks one (true: resumed, false: not this migration's, wait on).
    Status read_session(stream::ByteStream& st, uint32_t features, const std::vector<BlockInfo>& blocks);
    Status ride_out(std::unique_ptr<Connection>& conn, const Error& why);
    Result<bool> take_resumption(Connection& conn);
    // The rounds until END, resumed over new connections as the link breaks (a resumable source's).
    Status load_rounds(std::unique_ptr<Connection>& live, StreamLoader& loader, DestRamChannel* channel,
                       const RamVerifier* verifier);
    // A resumable precopy's switchover as a commit: READY, GO (or the source's rounds again, if it
    // took its guest back), the guest run, RUNNING, and the source's DONE; a broken link at any
    // step waits for the source to ask what this side holds.
    Status switchover(std::unique_ptr<Connection>& live, StreamLoader& loader, DestRamChannel* channel,
                      const RamVerifier* verifier);
    Status await_done(std::unique_ptr<Connection>& live);
    void cut_at(uint64_t step);  // x-switchover-cut
    static Result<PageSummer> sums_for(Connection& conn, DestRamChannel* channel, bool channel_sums);
    Result<StreamHeader> accept_header(Connection& conn);
    Status ready_and_go(stream::ByteStream& st, PostcopyReceiver* postcopy = nullptr);
    Status receive_postcopy(Connection& conn, const StreamHeader& header, const std::vector<Record>& discards);
    // A mapped restore (x-restore-mapped): guest RAM becomes the file's, and its check starts
    // on a thread of its own (a damaged page ends the machine through on_failure_).
    Status map_file(FileRam ram);
    Status receive_lazy(stream::ByteStream& st, const std::vector<BlockInfo>& blocks, LazyFileRam file);
    void publish(const StreamLoader& loader, const DestRamChannel* channel, const RamVerifier* verifier);
    void set_status(MigrationStatus s);

    machine::Machine& machine_;
    Transport& transport_;
    Uri uri_;
    SettingsFn settings_;
    Options options_;  // the settings this migration runs with: read again when a source connects
    stream::CancelToken cancel_;
    // Under mutex_: the recovery's listener and connection (cancel_ too cancels it); a
    // migrate_recover while it waits cancels it alone.
    std::optional<stream::CancelToken> recovery_cancel_;
    bool stay_paused_;
    StatusFn on_status_;
    FailFn on_failure_;
    std::unique_ptr<Listener> listener_;
    Connection* live_ = nullptr;  // under mutex_: the connection in use (for migrate_pause)
    // Under mutex_: how many of the transport's setup steps were its accept, and how long the
    // header took to check and answer (setup_parts_of).
    size_t accept_steps_ = 0;
    // The hand-over rehearsed before the source came (the incoming thread's alone).
    std::optional<Result<uint32_t>> rehearsal_;
    double header_ms_ = 0;
    mutable std::mutex mutex_;
    MigrationStats stats_;
    std::chrono::steady_clock::time_point start_;
    std::unique_ptr<PostcopyReceiver> receiver_;  // under mutex_ for readers; set before the guest runs
    std::unique_ptr<LazyRestore> lazy_;           // likewise, for a lazy restore
    double lazy_ready_ms_ = 0;                    // under mutex_: its guest could run this long after start_
    bool in_postcopy_ = false;  // GO came in postcopy: the guest runs here
    struct Session {
        uint64_t id = 0;
        uint32_t window_ms = 0;  // the source's x-resume-window
    };
    std::optional<Session> session_;               // the source resumes a broken precopy
    // What a resumption is told this side holds: arrived pages (precopy), the loaded state (ready:
    // waiting for GO), or the running guest (running: waiting for DONE).
    enum class Phase { precopy, ready, running } phase_ = Phase::precopy;
    bool cut_done_ = false;                       // x-switchover-cut has cut once
    std::unique_ptr<ArrivalRounds> arrivals_;      // with session_: the round each page arrived in
    std::thread thread_;
    std::unique_ptr<MappedFileGuard> guard_;           // a mapped restore's lease on its file (outlives the check)
    std::optional<stream::CancelToken> check_cancel_;  // a mapped restore's check: cancelled and joined last
    std::thread checker_;
};

}  // namespace vmm::migration
