// IncomingMigration: the destination side. listen() binds at once (so a busy port is reported
// at start-up); start() accepts the source on a thread, checks its header against this machine,
// loads RAM and state, answers READY, and on GO runs the guest (or leaves it paused with -S).
// Any failure calls on_failure with one line; the process then exits non-zero, except in
// postcopy: the guest runs here then, so a broken link leaves it waiting (postcopy-paused) for
// migrate_recover and the source's 'migrate -r'. A precopy whose source announced it resumes
// (x-resume-window) waits likewise when its link breaks (precopy-paused: PrecopyWait), keeping
// every page that arrived, for the source to come back within its window. A restore from a file
// may run the guest before every page is read (FileRestore).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "vmm/migration/postcopy/receiver.h"
#include "vmm/migration/session/destination_core.h"
#include "vmm/migration/session/destination_file.h"
#include "vmm/migration/session/destination_resume.h"

namespace vmm::migration {

class IncomingMigration {
public:
    using StatusFn = DestinationCore::StatusFn;
    using FailFn = DestinationCore::FailFn;

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
    // This side's setup step by step (core_.mutex held): the transport's accept from the source's
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
    // How x-fallback-uri's transport is found (the manager's registry), before start().
    using FindTransport = std::function<Result<Transport*>(const std::string& scheme)>;
    void find_transports_with(FindTransport fn) { find_transport_ = std::move(fn); }

private:
    void run();
    void run_recovery();
    // The recovery waiting for the source stops listening (it has not come: live is null).
    Status stop_waiting();
    // The connection is done with (`s`: how it ended): it and the listener go, and the status says what follows.
    void end_connection(Status s, std::unique_ptr<Connection> conn);
    Status resume(Connection& conn);
    Status receive(std::unique_ptr<Connection>& conn);
    // After the rounds: the guest handed over in precopy, postcopy, or from a file.
    Status finish(Connection& conn, const StreamHeader& header, StreamLoader& loader, DestRamChannel* channel);
    static Result<PageSummer> sums_for(Connection& conn, DestRamChannel* channel, bool channel_sums);
    Result<StreamHeader> accept_header(Connection& conn);
    // x-fallback-uri here, once a resumable precopy began: its resumption may come there too.
    void listen_on_fallback();
    Status ready_and_go(stream::ByteStream& st, PostcopyReceiver* postcopy = nullptr);
    Status receive_postcopy(Connection& conn, const StreamHeader& header, const std::vector<Record>& discards);

    DestinationCore core_;
    Transport& transport_;
    SettingsFn settings_;
    FindTransport find_transport_;
    // Under core_.mutex: the recovery's listener and connection (core_.cancel too cancels it); a
    // migrate_recover while it waits cancels it alone.
    std::optional<stream::CancelToken> recovery_cancel_;
    // Under core_.mutex: how many of the transport's setup steps were its accept, and how long the
    // header took to check and answer (setup_parts_of).
    size_t accept_steps_ = 0;
    double header_ms_ = 0;
    // The hand-over rehearsed before the source came (the incoming thread's alone).
    std::optional<Result<uint32_t>> rehearsal_;
    std::unique_ptr<PostcopyReceiver> receiver_;  // under core_.mutex for readers; set before the guest runs
    bool in_postcopy_ = false;                    // GO came in postcopy: the guest runs here
    PrecopyWait precopy_wait_{core_};
    FileRestore file_{core_};
    std::thread thread_;
};

}  // namespace vmm::migration
