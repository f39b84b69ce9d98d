// MigrationSource's precopy across a broken link (source.h, x-resume-window): precopy-paused
// while the guest runs on, a new connection to the same URI (or the one 'migrate -r' names)
// every 100 ms, and on it only what the destination does not hold (precopy/resume.h).
#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/memory/dirty_bitmap.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/session/source.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;

// Per block, the pages the host has populated (all of them when pagemap cannot be read).
std::vector<std::vector<uint64_t>> populated_pages(const memory::GuestMemory& mem) {
    std::vector<std::vector<uint64_t>> out;
    auto pagemap = memory::PagemapReader::open();
    for (const auto& b : mem.blocks()) {
        out.emplace_back((b->pages() + 63) / 64, 0);
        auto& bits = out.back();
        Status s = pagemap ? pagemap->for_each_populated_run(*b, [&](uint64_t first, uint64_t n) {
            memory::set_run(bits, first, n);
            return Status{};
        })
                           : Status(Error("no pagemap"));
        if (!s) memory::set_run(bits, 0, b->pages());
    }
    return out;
}
}  // namespace

std::vector<uint64_t> pages_per_block(const memory::GuestMemory& mem) {
    std::vector<uint64_t> pages;
    for (const auto& b : mem.blocks()) pages.push_back(b->pages());
    return pages;
}

// Only a socket's stream, carrying everything inline, comes back: a RAM channel (multifd's
// lanes, RDMA) and postcopy's extra connection would have to be rebuilt as well.
bool MigrationSource::can_resume() const {
    if (options_.params.resume_window_ms == 0 || !conn_ || !conn_->answers()) return false;
    if (conn_->source_ram() != nullptr || conn_->save_target() != nullptr || options_.caps.postcopy_ram) return false;
    return uri_.scheme == "tcp" || uri_.scheme == "unix";
}

bool MigrationSource::link_broke_in_precopy(const Run& run) const {
    if (session_id_ == 0 || !answered_ || cancel_.cancelled() || went_go_ || went_postcopy_ || switching_) return false;
    return run.conn->stream().link_broke();
}

Result<std::vector<std::vector<uint64_t>>> MigrationSource::take_for_round(uint32_t round) {
    auto bitmaps = take_dirty();
    if (bitmaps && sent_rounds_) sent_rounds_->taken(round, *bitmaps);
    return bitmaps;
}

Status MigrationSource::send_session(stream::ByteStream& st, uint32_t window_ms) {
    Record r;
    r.type = RecordType::session;
    r.session = session_id_;
    r.window_ms = window_ms;
    r.round = sent_rounds_ ? sent_rounds_->last() : 0;
    return st.write(encode_record(r));
}

Status MigrationSource::send_resuming_header(stream::ByteStream& st, uint32_t window_ms) {
    StreamHeader header = header_for(machine_);
    header.features = header_features_ | kFeaturePrecopyResume;
    if (auto s = st.write(encode_header(header)); !s) return s;
    if (auto s = send_session(st, window_ms); !s) return s;
    return st.flush();
}

MigrationSource::ResumeTo MigrationSource::next_way(bool& asked) {
    std::lock_guard lock(mutex_);
    asked = resume_to_.has_value();
    return asked ? *resume_to_ : ResumeTo{&transport_, uri_};
}

Status MigrationSource::ride_out(Run& run, Error why) {
    auto paused_at = Clock::now();
    auto window = std::chrono::milliseconds(options_.params.resume_window_ms);
    // The guest runs on, unthrottled, while nothing can be sent (a break in the last round
    // paused it).
    machine_.set_throttle(0);
    if (paused_by_us_ && was_running_) (void)machine_.resume();
    paused_by_us_ = false;
    log::warn("the link to {} broke in precopy: {}; the guest runs on here, and this side tries to resume for {} ms "
              "(x-resume-window), sending then only what the destination lacks",
              uri_.text, why.message(), window.count());
    {
        std::lock_guard lock(mutex_);
        broke_because_ = why.message();
        stats_.error = fmt::format("the link broke ({}); resuming within x-resume-window", why.message());
        if (conn_) {
            (void)conn_->cut();
            broken_.push_back(std::move(conn_));  // run.conn refers to it until a new one works
        }
    }
    set_status(MigrationStatus::precopy_paused);
    Error last = why;
    for (;;) {
        if (cancel_.cancelled()) return Error("migration cancelled");
        if (Clock::now() - paused_at >= window) {
            return Error(fmt::format("the link to {} broke ({}) and did not come back within x-resume-window ({} ms); last "
                                     "try: {}",
                                     uri_.text, why.message(), window.count(), last.message()));
        }
        bool asked = false;
        ResumeTo to = next_way(asked);
        auto done = reconnect_precopy(to, run, last);
        if (!done && asked && !cancel_.cancelled()) {
            // A URI the user gave that leads nowhere, or to a vmm that refuses: said, and the
            // migration's own way is tried again; nothing is lost.
            log::warn("'migrate -r {}' did not resume the precopy: {}; trying {} again", to.uri.text,
                      done.error().message(), uri_.text);
            std::lock_guard lock(mutex_);
            if (resume_to_ && resume_to_->uri.text == to.uri.text) resume_to_.reset();
            stats_.error = fmt::format("the link broke ({}); 'migrate -r {}' did not resume it ({}); resuming within "
                                       "x-resume-window",
                                       broke_because_, to.uri.text, done.error().message());
            last = done.error();
            continue;
        }
        if (!done) return done.error();
        if (*done) break;
        std::unique_lock lock(mutex_);
        resume_cv_.wait_for(lock, kReconnectEvery);
    }
    {
        std::lock_guard lock(mutex_);
        ++stats_.precopy_resumes;
        stats_.precopy_paused_ms += ms_between(paused_at, Clock::now());
        stats_.error.clear();
        resume_to_.reset();
        broken_.clear();
    }
    // A break in the last round left the rate unpaced: the guest runs again, so it follows
    // max-bandwidth again.
    run.limiter = RateLimiter(live_->reader(Live::max_bandwidth), RateLimiter::cancellable_sleep(cancel_));
    log::info("precopy to {} resumed after {:.0f} ms: {} pages go again", conn_->describe(),
              ms_between(paused_at, Clock::now()), resent_now_);
    return {};
}

Result<std::unique_ptr<Connection>> MigrationSource::open_resumption(const ResumeTo& to, Error& last) {
    using None = std::unique_ptr<Connection>;
    auto conn = to.transport->connect(context_for(machine_, to.uri, [o = options_] { return o; }, cancel_));
    if (!conn) {
        if (cancel_.cancelled()) return conn.error();
        // A paused destination listens until its window ends: nobody there means it has ended.
        if (conn.error().sys_errno() == ECONNREFUSED) {
            return Error(fmt::format("the link to {} broke ({}), and nothing listens there any more: the destination "
                                     "has ended (its log says why)",
                                     to.uri.text, broke_because_));
        }
        last = conn.error();
        return None();
    }
    stream::ByteStream& st = (*conn)->stream();
    auto sent = send_resuming_header(st, static_cast<uint32_t>(options_.params.resume_window_ms));
    if (sent) sent = st.await_readable(std::chrono::milliseconds(options_.params.connect_timeout_ms));
    if (!sent) {
        last = sent.error();
        return None();
    }
    auto reply = read_reply(st);
    if (!reply) {
        last = reply.error().context("the destination hung up on the resumption");
        return None();
    }
    // A destination that answers and refuses has said this migration cannot go on there.
    if (reply->type == ReplyType::refused) return Error("the destination refused to resume the precopy: " + reply->reason);
    if (reply->type != ReplyType::header_ok) return Error("the destination answered the resumption out of turn");
    return std::move(*conn);
}

// After HEADER_OK the destination says what it holds: the round each page arrived in
// (RECEIVED_ROUNDS), or READY (the state loaded: every page sent arrived), or RUNNING.
Result<bool> MigrationSource::reconnect_precopy(const ResumeTo& to, Run& run, Error& last) {
    auto conn = open_resumption(to, last);
    if (!conn) return conn.error();
    if (!*conn) return false;
    stream::ByteStream& st = (*conn)->stream();
    uint8_t first = 0;
    if (auto s = st.read_exact(std::span<uint8_t>(&first, 1)); !s) {
        last = s.error();
        return false;
    }
    (void)st.unread(std::span<const uint8_t>(&first, 1));
    std::vector<std::vector<uint64_t>> resend;
    if (first == static_cast<uint8_t>(ReplyType::ready)) {
        (void)read_reply(st);  // everything sent arrived; only what the guest dirtied since goes
        for (const auto& b : machine_.memory().blocks()) resend.emplace_back((b->pages() + 63) / 64, 0);
    } else if (first == static_cast<uint8_t>(ReplyType::running)) {
        return Error("the destination says it runs the guest, and this side never sent it GO: two copies may run; "
                     "stop one");
    } else {
        StreamHeader header = header_for(machine_);
        ReportedRounds arrived(pages_per_block(machine_.memory()), sent_rounds_->last());
        while (!arrived.complete()) {
            auto m = read_return(st, header.blocks, kStreamPageSize);
            if (!m) {
                if (!st.link_broke()) return m.error().context("precopy resume");
                last = m.error();
                return false;
            }
            if (auto s = arrived.add(m->message, m->rounds); !s) return s.error();
        }
        auto populated = populated_pages(machine_.memory());
        resend = pages_to_resend(*sent_rounds_, arrived, [&](size_t b, uint64_t p) {
            return ((populated[b][p / 64] >> (p % 64)) & 1) != 0;
        });
    }
    uint64_t n = 0;
    for (const auto& words : resend) n += memory::count_bits(words.data(), words.size());
    {
        std::lock_guard lock(mutex_);
        conn_ = std::move(*conn);
        stats_.uri = to.uri.text;
        stats_.resent_pages += n;
    }
    resent_now_ = n;
    uri_ = to.uri;
    run.conn = conn_.get();
    run.saver.rebind(conn_->stream());
    run.resend = std::move(resend);
    set_status(MigrationStatus::active);
    return true;
}

// Best effort, once the migration has failed or been cancelled: a destination waiting for this
// precopy to resume hears at once that it will not, instead of at its window's end.
void MigrationSource::say_goodbye() {
    auto token = stream::CancelToken::create();
    if (!token) return;
    Options quick = options_;
    quick.params.connect_timeout_ms = std::min<uint64_t>(quick.params.connect_timeout_ms, 2000);
    quick.params.io_timeout_ms = std::min<uint64_t>(quick.params.io_timeout_ms, 2000);
    auto conn = transport_.connect(context_for(machine_, uri_, [quick] { return quick; }, *token));
    if (!conn) return;  // gone already, or unreachable: it ends at its window
    stream::ByteStream& st = (*conn)->stream();
    if (send_resuming_header(st, 0)) {
        (void)st.await_readable(std::chrono::milliseconds(quick.params.connect_timeout_ms));  // its answer, or its close
    }
}

}  // namespace vmm::migration
