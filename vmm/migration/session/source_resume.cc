// PrecopyResumption (source_resume.h): precopy-paused while the guest runs on, a new connection
// to the same URI (or the one 'migrate -r' names) every 100 ms, and on it only what the
// destination does not hold (precopy/resume.h).
#include "vmm/migration/session/source_resume.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/memory/dirty_bitmap.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/multifd_wire.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;
// After a break, how long the migration's own way is tried alone before x-fallback-uri's turns.
constexpr auto kOwnWayFirst = std::chrono::seconds(2);

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

Status PrecopyResumption::begin(StreamHeader& header) {
    Connection* conn = core_.conn.get();
    SourceRamChannel* ram = conn != nullptr ? conn->source_ram() : nullptr;
    // Pages inline come back over a socket's new connection; a RAM channel (multifd's lanes, a
    // plugin's such as rdma) when it says it can.
    bool way_back = ram != nullptr ? ram->resumable() : core_.uri.scheme == "tcp" || core_.uri.scheme == "unix";
    // With postcopy-ram the precopy before the switch resumes so too; once the switch has begun
    // a broken link is postcopy's to recover (link_broke's `in_precopy`).
    bool can = core_.options.params.resume_window_ms != 0 && conn != nullptr && conn->answers() && way_back &&
               conn->save_target() == nullptr;
    if (can) {
        auto id = new_session_id();
        if (!id) return id.error();
        session_id_ = *id | 1;  // never 0 (0: not resumable)
        sent_rounds_.emplace(pages_per_block(core_.machine.memory()));
        header.features |= kFeatureResumable;
        core_.new_way(core_.uri.text, 0);
        listen_for_deliveries(*conn);
    }
    header_features_ = header.features;
    header_mode_ = header.ram_mode;
    return {};
}

bool PrecopyResumption::link_broke(const SourceRun& run, bool in_precopy) const {
    if (session_id_ == 0 || !answered_ || core_.cancel.cancelled() || !in_precopy) return false;
    return run.conn->link_broke();
}

void PrecopyResumption::listen_for_deliveries(Connection& c) {
    SourceRamChannel* ram = c.source_ram();
    if (ram == nullptr || session_id_ == 0 || core_.verify_for(c) != RamSaver::Verify::off) return;
    bool hears = ram->on_delivered([this](uint32_t block, uint64_t first_page, uint64_t count) {
        std::lock_guard lock(delivered_mutex_);
        if (delivered_) delivered_->landed(block, first_page, count, round_now_.load());
    });
    std::lock_guard lock(delivered_mutex_);
    if (hears && !delivered_) delivered_.emplace(header_for(core_.machine).blocks);
}

Result<SourceCore::Bitmaps> PrecopyResumption::take_for_round(uint32_t round) {
    round_now_ = round;
    auto bitmaps = core_.take_dirty();
    if (bitmaps && sent_rounds_) sent_rounds_->taken(round, *bitmaps);
    return bitmaps;
}

void PrecopyResumption::resent_in(uint32_t round, const SourceCore::Bitmaps& bitmaps) {
    if (sent_rounds_) sent_rounds_->taken(round, bitmaps);
}

Status PrecopyResumption::send_session(stream::ByteStream& st, uint32_t window_ms) {
    Record r;
    r.type = RecordType::session;
    r.session = session_id_;
    r.window_ms = window_ms;
    r.round = sent_rounds_ ? sent_rounds_->last() : 0;
    return st.write(encode_record(r));
}

Status PrecopyResumption::send_resuming_header(Connection& c, uint32_t window_ms) {
    stream::ByteStream& st = c.stream();
    // As the first header, for this connection: its RAM inline or on its channel, and the sums
    // as they go on it (a fallback's inline records carry theirs).
    StreamHeader header = header_for(core_.machine, c.source_ram() != nullptr ? RamMode::transport_channel : RamMode::inline_pages);
    header.features = (header_features_ & ~(kFeatureRoundSums | kFeatureChannelSums)) | kFeaturePrecopyResume;
    if (c.source_ram() == nullptr) header.features &= ~kFeatureRoundLanded;  // a fallback's RAM comes inline
    RamSaver::Verify v = core_.verify_for(c);
    if (v == RamSaver::Verify::round_sums) header.features |= kFeatureRoundSums;
    if (v == RamSaver::Verify::channel_sums) header.features |= kFeatureChannelSums;
    if (auto s = st.write(encode_header(header)); !s) return s;
    if (auto s = send_session(st, window_ms); !s) return s;
    return st.flush();
}

Status PrecopyResumption::ride_out(SourceRun& run, Error why) {
    auto paused_at = Clock::now();
    auto window = std::chrono::milliseconds(core_.options.params.resume_window_ms);
    // The guest runs on, unthrottled, while nothing can be sent (a break in the last round
    // paused it).
    core_.give_guest_back();
    log::warn("the link to {} broke in precopy: {}; the guest runs on here, and this side tries to resume for {} ms "
              "(x-resume-window), sending then only what the destination lacks",
              core_.uri.text, why.message(), window.count());
    broke_because_ = why.message();
    core_.set_link_aside(fmt::format("the link broke ({}); resuming within x-resume-window", why.message()));
    core_.set_status(MigrationStatus::precopy_paused);
    Error last = why;
    uint64_t tries = 0;
    for (;;) {
        if (core_.cancel.cancelled()) return Error("migration cancelled");
        if (auto late = past_window(paused_at, why, last)) return *late;
        bool asked = false;
        // Its own way alone at first (most breaks are flaps); then each try alternates.
        bool fallback_turn = Clock::now() - paused_at >= kOwnWayFirst && (++tries % 2 == 0);
        ResumeTo to = core_.next_way(asked, fallback_turn);
        auto done = reconnect(to, run, last);
        if (!done && asked && !core_.cancel.cancelled()) {
            // A URI the user gave that leads nowhere, or to a vmm that refuses: said, and the
            // migration's own way is tried again; nothing is lost.
            log::warn("'migrate -r {}' did not resume the precopy: {}; trying {} again", to.uri.text,
                      done.error().message(), core_.uri.text);
            std::lock_guard lock(core_.mutex);
            if (core_.resume_to && core_.resume_to->uri.text == to.uri.text) core_.resume_to.reset();
            core_.stats.error = fmt::format("the link broke ({}); 'migrate -r {}' did not resume it ({}); resuming within "
                                            "x-resume-window",
                                            broke_because_, to.uri.text, done.error().message());
            last = done.error();
            continue;
        }
        if (!done) return done.error();
        if (*done) break;
        core_.wait_before_next_try();
    }
    core_.link_back(paused_at);
    // A break in the last round left the rate unpaced: the guest runs again, so it follows
    // max-bandwidth again.
    run.limiter = RateLimiter(core_.live->reader(Live::max_bandwidth), RateLimiter::cancellable_sleep(core_.cancel));
    log::info("precopy to {} resumed after {:.0f} ms: {} pages go again (the destination holds {})",
              core_.conn->describe(), ms_between(paused_at, Clock::now()), resent_now_, held_now_);
    return {};
}

std::optional<Error> PrecopyResumption::past_window(SteadyClock::time_point paused_at, const Error& why, const Error& last) const {
    auto window = std::chrono::milliseconds(core_.options.params.resume_window_ms);
    if (Clock::now() - paused_at < window) return std::nullopt;
    return Error(fmt::format("the link to {} broke ({}) and did not come back within x-resume-window ({} ms); last try: {}",
                             core_.uri.text, why.message(), window.count(), last.message()));
}

uint64_t PrecopyResumption::try_wait_ms() const {
    auto eightfold = static_cast<uint64_t>(8 * first_connect_ms_);
    return std::min<uint64_t>(core_.options.params.connect_timeout_ms, std::max<uint64_t>(eightfold, 1000));
}

Result<std::unique_ptr<Connection>> PrecopyResumption::open(const ResumeTo& to, Error& last) {
    using None = std::unique_ptr<Connection>;
    const Options& o = core_.options;
    Options one_try = o;
    one_try.params.connect_timeout_ms = try_wait_ms();
    auto conn = to.transport->connect(context_for(core_.machine, to.uri, [one_try] { return one_try; }, core_.cancel));
    if (!conn) {
        if (core_.cancel.cancelled()) return conn.error();
        // A paused destination listens until its window ends: nobody there means it has ended
        // (on its fallback way, that it does not listen there: not yet, or not at all).
        if (conn.error().sys_errno() == ECONNREFUSED && !to.fallback) {
            return Error(fmt::format("the link to {} broke ({}), and nothing listens there any more: the destination "
                                     "has ended (its log says why)",
                                     to.uri.text, broke_because_));
        }
        last = conn.error();
        return None();
    }
    stream::ByteStream& st = (*conn)->stream();
    auto sent = send_resuming_header(**conn, static_cast<uint32_t>(o.params.resume_window_ms));
    if (sent) sent = st.await_readable(std::chrono::milliseconds(o.params.connect_timeout_ms));
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
Result<std::optional<SourceCore::Bitmaps>> PrecopyResumption::what_to_resend(stream::ByteStream& st, Error& last) {
    using None = std::optional<SourceCore::Bitmaps>;
    uint8_t first = 0;
    if (auto s = st.read_exact(std::span<uint8_t>(&first, 1)); !s) {
        last = s.error();
        return None();
    }
    (void)st.unread(std::span<const uint8_t>(&first, 1));
    SourceCore::Bitmaps resend;
    if (first == static_cast<uint8_t>(ReplyType::ready)) {
        (void)read_reply(st);  // everything sent arrived; only what the guest dirtied since goes
        for (const auto& b : core_.machine.memory().blocks()) resend.emplace_back((b->pages() + 63) / 64, 0);
        return std::optional(std::move(resend));
    }
    if (first == static_cast<uint8_t>(ReplyType::running)) {
        return Error("the destination says it runs the guest, and this side never sent it GO: two copies may run; "
                     "stop one");
    }
    StreamHeader header = header_for(core_.machine);
    ReportedRounds arrived(pages_per_block(core_.machine.memory()), sent_rounds_->last());
    while (!arrived.complete()) {
        auto m = read_return(st, header.blocks, kStreamPageSize);
        if (!m) {
            if (!st.link_broke()) return m.error().context("precopy resume");
            last = m.error();
            return None();
        }
        if (auto s = arrived.add(m->message, m->rounds); !s) return s.error();
    }
    uint64_t vouched = 0;
    {
        std::lock_guard lock(delivered_mutex_);
        if (delivered_) vouched = arrived.also_arrived(*delivered_);
    }
    if (vouched != 0) log::info("precopy resume: {} pages this side's transport delivered do not go again", vouched);
    held_now_ = arrived.held();
    auto populated = populated_pages(core_.machine.memory());
    return std::optional(pages_to_resend(*sent_rounds_, arrived, [&](size_t b, uint64_t p) {
        return ((populated[b][p / 64] >> (p % 64)) & 1) != 0;
    }));
}

Result<bool> PrecopyResumption::reconnect(const ResumeTo& to, SourceRun& run, Error& last) {
    auto conn = open(to, last);
    if (!conn) return conn.error();
    if (!*conn) return false;
    auto resend = what_to_resend((*conn)->stream(), last);
    if (!resend) return resend.error();
    if (!*resend) return false;
    // The rounds go on inline (a fallback such as tcp: for rdma:), or over the new connection's
    // RAM channel (multifd: its new lanes) of the kind the first had, set up as the first was.
    SourceRamChannel* ram = (*conn)->source_ram();
    if (ram != nullptr && (header_mode_ != RamMode::transport_channel || !ram->resumable())) {
        return Error(fmt::format("{} carries RAM on a channel of its own, and this precopy began without one: it cannot "
                                 "resume on it",
                                 (*conn)->describe()));
    }
    if (Status s = ram != nullptr ? ram->setup() : Status{}; !s) {
        last = s.error();
        return false;
    }
    core_.verify = core_.verify_for(**conn);
    run.saver.rebind((*conn)->stream(), ram, core_.verify);  // lets go of the broken connection's channel first
    listen_for_deliveries(**conn);
    if (to.uri.text != core_.uri.text) {
        core_.new_way(to.uri.text, run.work.transferred);
        // The way it broke on becomes the other: a later break may go back to it.
        if (to.fallback) core_.fallback = ResumeTo{core_.transport, core_.uri, true};
    }
    uint64_t n = 0;
    for (const auto& words : **resend) n += memory::count_bits(words.data(), words.size());
    {
        std::lock_guard lock(core_.mutex);
        core_.conn = std::move(*conn);
        core_.stats.uri = to.uri.text;
        core_.stats.resent_pages += n;
    }
    resent_now_ = n;
    core_.uri = to.uri;
    core_.transport = to.transport;
    run.conn = core_.conn.get();
    run.resend = std::move(**resend);
    core_.set_status(MigrationStatus::active);
    return true;
}

// Best effort, once the migration has failed or been cancelled: a destination waiting for this
// precopy to resume hears at once that it will not, instead of at its window's end.
void PrecopyResumption::say_goodbye() {
    if (session_id_ == 0 || !answered_) return;
    auto token = stream::CancelToken::create();
    if (!token) return;
    Options quick = core_.options;
    quick.params.connect_timeout_ms = std::min<uint64_t>(quick.params.connect_timeout_ms, 2000);
    quick.params.io_timeout_ms = std::min<uint64_t>(quick.params.io_timeout_ms, 2000);
    auto conn = core_.transport->connect(context_for(core_.machine, core_.uri, [quick] { return quick; }, *token));
    if (!conn) return;  // gone already, or unreachable: it ends at its window
    stream::ByteStream& st = (*conn)->stream();
    if (send_resuming_header(**conn, 0)) {
        (void)st.await_readable(std::chrono::milliseconds(quick.params.connect_timeout_ms));  // its answer, or its close
    }
}

}  // namespace vmm::migration
