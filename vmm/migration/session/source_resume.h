// PrecopyResumption: an outgoing precopy across a broken link (x-resume-window). It owns the
// session (the random id the SESSION record ties a resumption to) and what each round sent
// (SentRounds); when the link breaks it keeps the guest running (precopy-paused), connects again
// every 100 ms (to the same URI, or the one 'migrate -r' names) and sends only what the
// destination lacks (precopy/resume.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "vmm/common/elapsed.h"
#include "vmm/migration/precopy/resume.h"
#include "vmm/migration/session/source_core.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class PrecopyResumption {
public:
    explicit PrecopyResumption(SourceCore& core) : core_(core) {}

    // Decided once, before the header goes: a resumable migration gets a session, and `header`
    // says so (kFeatureResumable). A socket's connection comes back, its pages inline or on
    // multifd's lanes (a new connection brings new lanes), and a plugin's whose RAM channel says
    // it can (rdma: VMM_RAM_RESUMABLE).
    Status begin(StreamHeader& header);
    // SESSION after the first header: the id and the window the destination waits.
    Status send_session(stream::ByteStream& st, uint32_t window_ms);
    bool resumable() const { return session_id_ != 0; }
    void set_answered(bool yes) { answered_ = yes; }
    bool answered() const { return answered_; }
    // A break that leaves both sides in precopy: `in_precopy` false once the hand-over began.
    bool link_broke(const SourceRun& run, bool in_precopy) const;
    // The dirty bitmaps for `round` (its pages' contents go in it: SentRounds).
    Result<SourceCore::Bitmaps> take_for_round(uint32_t round);
    // The pages a resumption sends again go in `round` too.
    void resent_in(uint32_t round, const SourceCore::Bitmaps& bitmaps);
    // precopy-paused until a new link works (the run then carries it and what to send again),
    // or an error when the window passed or the destination refused.
    Status ride_out(SourceRun& run, Error why);
    // A resumption's connection, its header and SESSION sent and HEADER_OK read: none when this
    // try failed in a way worth another (`last` says how); an error when the destination refused.
    Result<std::unique_ptr<Connection>> open(const ResumeTo& to, Error& last);
    // What the last break was (a resumption refused for good quotes it).
    void broke(std::string why) { broke_because_ = std::move(why); }
    // SESSION with window 0, best effort: a destination waiting for this precopy stops waiting.
    void say_goodbye();
    // How long the first connection took to make: a try after a break waits as long for its
    // answer as 8 times that (at least 1 s, at most x-connect-timeout), and then tries anew, so a
    // link that comes back is used within about a second (a connection request lost in the outage
    // is otherwise sent again only after the network's own retry, seconds over RDMA's CM).
    void first_connect_took(double ms) { first_connect_ms_ = ms; }
    // Hears from `c`'s RAM channel what its transport delivered (SourceRamChannel::on_delivered),
    // where nothing else must vouch for a page (no verify-ram, no authenticated link): a resumption
    // then sends again only what neither that nor the destination's report covers.
    void listen_for_deliveries(Connection& c);

private:
    // One try: the destination's rounds, what to send again. False: worth trying again.
    Result<bool> reconnect(const ResumeTo& to, SourceRun& run, Error& last);
    // A resumption's first words on `c`: the header with kFeaturePrecopyResume, then SESSION.
    Status send_resuming_header(Connection& c, uint32_t window_ms);
    // The failure when the tries since the break (at `paused_at`) have run out of x-resume-window.
    std::optional<Error> past_window(SteadyClock::time_point paused_at, const Error& why, const Error& last) const;
    // first_connect_took's limit for one try's connection, ms.
    uint64_t try_wait_ms() const;
    // The pages to send again from the destination's report on `st`; none when the link broke.
    Result<std::optional<SourceCore::Bitmaps>> what_to_resend(stream::ByteStream& st, Error& last);

    SourceCore& core_;
    std::atomic<uint64_t> session_id_{0};   // nonzero: resumable (kFeatureResumable)
    std::optional<SentRounds> sent_rounds_;  // with session_id_
    std::atomic<bool> answered_{false};     // the destination accepted the first header
    uint32_t header_features_ = 0;          // what the first header announced
    RamMode header_mode_ = RamMode::inline_pages;  // and how its RAM goes: a resumption's goes the same way
    std::string broke_because_;             // the last break's error
    uint64_t resent_now_ = 0;               // pages the last resumption sends again
    uint64_t held_now_ = 0;                 // pages the destination held at the last resumption
    double first_connect_ms_ = 0;           // first_connect_took
    std::mutex delivered_mutex_;            // the channel reports from inside its calls, on any thread
    std::optional<ArrivalRounds> delivered_;  // listen_for_deliveries': per page, the round its write landed in
    std::atomic<uint32_t> round_now_{0};    // the round being sent (what a delivery belongs to)
};

}  // namespace vmm::migration
