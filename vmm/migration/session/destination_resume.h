// PrecopyWait: an incoming precopy whose source announced it resumes (x-resume-window). It owns
// the session (the SESSION record's id and window) and the round each page arrived in; when the
// link breaks it keeps every page (precopy-paused) and takes the source's new connection within
// its window. A resumable precopy's switchover is a commit: READY, GO (or the source's rounds
// again, if it took its guest back), the guest run, RUNNING, and the source's DONE; a broken
// link at any step waits for the source to ask what this side holds.
#pragma once

#include <atomic>
#include <memory>
#include <optional>

#include "vmm/migration/precopy/resume.h"
#include "vmm/migration/session/destination_core.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class PrecopyWait {
public:
    explicit PrecopyWait(DestinationCore& core) : core_(core) {}

    // The SESSION record after a resumable source's header; nothing otherwise (the header's RAM
    // mode is kept either way).
    Status read_session(stream::ByteStream& st, const StreamHeader& header, const std::vector<BlockInfo>& blocks);
    bool resumable() const { return session_.has_value(); }
    // The same, from any thread (the monitor's migrate_recover).
    bool announced() const { return announced_.load(); }
    // The loader notes the round each page arrived in, inline and through `channel` (with a
    // session); a channel that cannot say is refused.
    Status track_arrivals(StreamLoader& loader);
    // The rounds until END, resumed over new connections as the link breaks.
    Status load_rounds(std::unique_ptr<Connection>& live, StreamLoader& loader, RamVerifier* verifier);
    // The switchover as a commit (a resumable precopy's).
    Status switchover(std::unique_ptr<Connection>& live, StreamLoader& loader, RamVerifier* verifier);
    // migrate_recover URI during a resumable precopy (any thread): the source's resumption may
    // come there too, beside the listener the migration began on (e.g. tcp beside rdma, for a
    // fabric that failed: x-fallback-uri at the source). A later one takes its place.
    void listen_also(std::unique_ptr<Listener> more);
    // How the connection now carries RAM (a resumption may come another way: tcp: for rdma:),
    // and `conn`'s RAM channel when it does so on one.
    RamMode ram_mode() const { return ram_mode_; }
    DestRamChannel* channel_of(Connection& conn) const;

private:
    // precopy-paused until the source's new connection, which replaces `conn`; the loader (when
    // given) lets go of the broken one's RAM channel and reads the new one's.
    Status ride_out(std::unique_ptr<Connection>& conn, const Error& why, StreamLoader* loader = nullptr,
                    RamVerifier* verifier = nullptr);
    // The next connection on the migration's listener or the one listen_also() gave, until
    // `deadline`: with two, each is waited on a second at a time (a source's try that comes as
    // its listener's second ends is dropped, and the source tries again).
    Result<std::unique_ptr<Connection>> next_connection(std::chrono::steady_clock::time_point deadline);
    Status rebind(Connection& conn, StreamLoader& loader, RamVerifier* verifier);
    // One connection checked: true: resumed; false: not this migration's, wait on.
    Result<bool> take_resumption(Connection& conn);
    Status await_done(std::unique_ptr<Connection>& live);
    void cut_at(uint64_t step);  // x-switchover-cut

    struct Session {
        uint64_t id = 0;
        uint32_t window_ms = 0;  // the source's x-resume-window
        uint32_t features = 0;   // the first header's
    };
    RamMode ram_mode_ = RamMode::inline_pages;  // the first header's, then the last resumption's
    DestinationCore& core_;
    std::optional<Session> session_;
    // What a resumption is told this side holds: arrived pages (precopy), the loaded state (ready:
    // waiting for GO), or the running guest (running: waiting for DONE).
    enum class Phase { precopy, ready, running } phase_ = Phase::precopy;
    bool cut_done_ = false;                   // x-switchover-cut has cut once
    std::unique_ptr<ArrivalRounds> arrivals_;  // with session_: the round each page arrived in
    std::atomic<bool> announced_{false};       // session_ set
    std::unique_ptr<Listener> also_pending_;   // under core_.mutex: listen_also()'s, not yet taken
    std::unique_ptr<Listener> also_;           // the incoming thread's: taken from also_pending_
};

}  // namespace vmm::migration
