#include "vmm/migration/session/source.h"
#include "vmm/migration/session/source_run.h"

#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/convergence.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/stream/tls_stream.h"
#include "vmm/migration/postcopy/sender.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;
}  // namespace


MigrationSource::MigrationSource(machine::Machine& m, Transport& transport, Uri uri, Options options,
                                 std::shared_ptr<const LiveSettings> live, stream::CancelToken cancel, StatusFn on_status)
    : machine_(m), transport_(transport), uri_(std::move(uri)), options_(std::move(options)), live_(std::move(live)),
      cancel_(std::move(cancel)), on_status_(std::move(on_status)) {
    stats_.uri = uri_.text;
    stats_.ram.total = m.memory().total_size();
    // Checked when it was set: "off" or a duration.
    if (auto d = parse_deadline_ms(options_.params.deadline)) deadline_ms_ = *d;
}

MigrationSource::~MigrationSource() {
    cancel_.cancel();
    if (thread_.joinable()) thread_.join();
}

void MigrationSource::start(std::chrono::steady_clock::time_point asked) {
    start_ = asked;
    set_status(MigrationStatus::setup);
    thread_ = std::thread([this] { run(); });
}

void MigrationSource::cancel() {
    {
        std::lock_guard lock(mutex_);
        if (is_terminal(stats_.status)) return;
    }
    set_status(MigrationStatus::cancelling);
    cancel_.cancel();
}

bool MigrationSource::finished() const { return finished_; }

Status MigrationSource::start_postcopy() {
    if (!options_.caps.postcopy_ram) {
        return Error("this migration cannot switch to postcopy: set the postcopy-ram capability on both sides before "
                     "'migrate'");
    }
    auto st = stats().status;
    if (st != MigrationStatus::setup && st != MigrationStatus::active) {
        return Error(fmt::format("no precopy migration to switch to postcopy (status {})", to_string(st)));
    }
    postcopy_requested_ = true;
    return {};
}

bool MigrationSource::switch_now(uint32_t round) const {
    if (!options_.caps.postcopy_ram) return false;
    if (postcopy_requested_) return true;
    // `round` is the last round sent: 0 is the bulk round, so N rounds are done at round N - 1.
    return options_.params.postcopy_after_rounds != 0 && round + 1 >= options_.params.postcopy_after_rounds;
}

MigrationStats MigrationSource::stats() const {
    std::lock_guard lock(mutex_);
    MigrationStats s = stats_;
    if (!is_terminal(s.status)) s.total_time_ms = ms_since(start_);
    if (conn_ && tls_wanted(options_.params)) s.tls_key_updates = stream::tls_key_updates(conn_->stream());
    if (sender_ != nullptr) {
        s.postcopy = sender_->stats();
        s.postcopy.switch_ms = s.downtime_ms;  // the switch is postcopy's whole downtime
        s.ram.remaining = sender_->remaining_pages() * memory::kPageSize;
    }
    predict(s);
    return s;
}

// Precopy's plan as measured now (eta.h), from `s` (stats_ under mutex_, or a copy of it): the
// link's rate measured at the last round's end (during the first round, what had arrived when it
// was last published over the time it took: a fifth of a second at least, or the first figures
// say little), the guest's dirtying from the dirty-rate sampler's last period, and what is left:
// in the bulk round what it has still to send (the pages never touched cost the link nothing; the
// model adds what the guest dirties meanwhile as the next round), after it what is dirty.
EtaFacts MigrationSource::precopy_facts(const MigrationStats& s) const {
    double active_s = std::chrono::duration<double>(published_at_ - active_since_).count();
    double link = s.ram.mbps > 0 ? s.ram.mbps * 1e6 / 8 : (active_s >= 0.2 ? s.ram.transferred / active_s : 0);
    double dirty = machine_.dirty_rate().rate().pages_per_second * memory::kPageSize;
    uint64_t left = s.rounds == 0 ? s.ram.bulk_to_send : s.ram.remaining;
    return {left, link, dirty, static_cast<double>(options_.params.downtime_limit_ms), s.handover_estimate_ms};
}

// The time left (eta.h); in postcopy, the missing pages at the push's rate since the switch.
void MigrationSource::predict(MigrationStats& s) const {
    if (s.status == MigrationStatus::active) {
        EtaFacts f = precopy_facts(s);
        s.eta = precopy_eta(f);
        s.eta_link_bytes_per_s = f.link_bytes_per_s;
        s.eta_dirty_bytes_per_s = f.dirty_bytes_per_s;
    } else if (s.status == MigrationStatus::postcopy_active) {
        double since_switch = std::chrono::duration<double>(Clock::now() - switched_at_).count();
        double push = since_switch > 0 ? static_cast<double>(s.postcopy.postcopy_bytes) / since_switch : 0;
        s.eta = postcopy_eta(s.ram.remaining, push);
        s.eta_link_bytes_per_s = push;
    }
}

void MigrationSource::set_status(MigrationStatus s) {
    {
        std::lock_guard lock(mutex_);
        if (stats_.status == s) return;
        if (stats_.status == MigrationStatus::cancelling && s != MigrationStatus::cancelled) return;
        stats_.status = s;
    }
    if (on_status_ && options_.caps.events) on_status_(s);
}

void MigrationSource::fail(const Error& e) {
    // Give the guest back first, unthrottled: a failed migration must never leave the source
    // stopped or slowed.
    machine_.set_throttle(0);
    if (paused_by_us_ && was_running_) (void)machine_.resume();
    bool cancelled = cancel_.cancelled();
    {
        std::lock_guard lock(mutex_);
        stats_.error = cancelled ? "cancelled by the user" : e.message();
        stats_.total_time_ms = ms_since(start_);
        stats_.cpu_throttle_percentage = 0;
    }
    if (went_postcopy_ && machine_.run_state() != machine::RunState::postmigrate) {
        // Forced to run here ('cont -f') while postcopy was paused: the user took this copy back.
        log::error("postcopy to {} ended: {}", uri_.text, e.message());
        set_status(MigrationStatus::failed);
        return;
    }
    if (went_postcopy_) {
        // The guest ran on at the destination: it is split between the two sides, and running
        // it here would fork it. The source keeps it paused with the RAM it had at the switch.
        log::error("postcopy to {} broke: {}; the source keeps the guest paused with all of its RAM as at the switch "
                   "('cont -f' would run it here, forking it)",
                   uri_.text, e.message());
        machine_.refuse_resume(fmt::format("postcopy to {} broke after the guest ran on there ({}): running the copy "
                                           "here would fork it; 'cont -f' forces it",
                                           uri_.text, e.message()));
        set_status(MigrationStatus::postcopy_paused);
        return;
    }
    if (!cancelled) log::error("migration to {} failed: {}", uri_.text, e.message());
    set_status(cancelled ? MigrationStatus::cancelled : MigrationStatus::failed);
}

void MigrationSource::run() {
    name_this_thread("migration");
    was_running_ = machine_.run_state() == machine::RunState::running;
    machine_.control().start_migration_window();  // the guest's stalls are timed from here
    Connection* conn = nullptr;
    Status s = setup(conn);
    if (s) {
        Run r(*this, *conn);
        for (;;) {
            s = precopy(r);
            if (s) s = switching_ ? postcopy(r) : complete(r);
            if (s || !link_broke_in_precopy(r)) break;
            if (s = ride_out(r, s.error()); !s) break;  // resumed: the rounds go on from what arrived
        }
    }
    if (!s) {
        fail(s.error());
        if (conn_) conn_->abort(s.error().message());  // a destination still there hears why at once
        if (session_id_ != 0 && answered_ && !went_postcopy_) say_goodbye();
    }
    std::unique_ptr<Connection> closing;
    {
        std::lock_guard lock(mutex_);
        if (conn_ && tls_wanted(options_.params)) stats_.tls_key_updates = stream::tls_key_updates(conn_->stream());
        closing = std::move(conn_);
        broken_.clear();
    }
    closing.reset();  // closes the connection; the destination sees the end
    finished_ = true;
}

// How this migration's RAM is verified: inline records carry their sums; a channel either sums
// its own records (multifd lanes), or the saver sums what it hands it: for the channel to carry
// as the pages land (RDMA with our extension), or else for the stream after the channel's round.
RamSaver::Verify MigrationSource::verify_mode() const {
    SourceRamChannel* channel = conn_ ? conn_->source_ram() : nullptr;
    // Authenticated (tls-creds over rdma:): every page goes with its MAC, verify-ram or not.
    if (summer_.keyed() && channel != nullptr) return RamSaver::Verify::channel_sums;
    if (!options_.caps.verify_ram) return RamSaver::Verify::off;
    if (channel == nullptr) return RamSaver::Verify::summed;
    if (channel->verifies()) return RamSaver::Verify::off;
    return channel->carries_sums() ? RamSaver::Verify::channel_sums : RamSaver::Verify::round_sums;
}

// Setup, from the migrate command until the first round may begin, timed step by step (the
// transport's own steps inside its own): the connection, the header the destination checks and
// answers (rehearsing the hand-over), and the RAM channel's setup with its peer.
Status MigrationSource::setup(Connection*& conn_out) {
    PartClock clock(start_);
    clock.mark("start");  // the command until this thread began
    auto conn = transport_.connect(context_for(machine_, uri_, [o = options_] { return o; }, cancel_));
    if (!conn) return conn.error();
    {
        std::lock_guard lock(mutex_);
        conn_ = std::move(*conn);
    }
    std::vector<SetupPart> connect_steps = conn_->setup_parts();
    clock.mark("connect", connect_steps);
    log::info("migrating to {}", conn_->describe());
    auto handover_us = negotiate();
    if (!handover_us) return handover_us.error();
    clock.mark("header");
    if (SourceRamChannel* channel = conn_->source_ram(); channel != nullptr)
        if (auto s = channel->setup(); !s) return s;
    std::vector<SetupPart> steps = conn_->setup_parts();
    steps.erase(steps.begin(), steps.begin() + static_cast<long>(std::min(connect_steps.size(), steps.size())));
    clock.mark("ram-setup", std::move(steps));
    std::lock_guard lock(mutex_);
    stats_.handover_estimate_ms = *handover_us / 1000.0;
    stats_.setup_time_ms = static_cast<uint64_t>(total_ms(clock.parts));  // the parts tile it: one clock, no gap
    stats_.setup_parts = std::move(clock.parts);
    conn_out = conn_.get();
    return {};
}

// The header, with what it announces (RAM mode, verify-ram, postcopy) checked against what the
// connection can carry, and the destination's answer: its rehearsed hand-over time (us).
Result<uint32_t> MigrationSource::negotiate() {
    RamMode mode = conn_->source_ram() != nullptr ? RamMode::transport_channel : RamMode::inline_pages;
    StreamHeader header = header_for(machine_, mode);
    auto key = conn_->sums_key();
    if (!key) return key.error();
    summer_ = *key ? PageSummer(**key) : PageSummer();
    if (summer_.keyed() && (conn_->source_ram() == nullptr || !conn_->source_ram()->carries_sums())) {
        return Error(fmt::format("{} is authenticated but carries no RAM sums to authenticate the pages with", conn_->describe()));
    }
    header.features = sums_on() ? kFeatureVerifyRam : 0;
    verify_ = verify_mode();
    if (verify_ == RamSaver::Verify::round_sums) header.features |= kFeatureRoundSums;
    if (verify_ == RamSaver::Verify::channel_sums) header.features |= kFeatureChannelSums;
    if (auto s = check_connection(); !s) return s.error();
    if (options_.caps.postcopy_ram) header.features |= kFeaturePostcopy;
    if (can_resume()) {
        auto id = new_session_id();
        if (!id) return id.error();
        session_id_ = *id | 1;  // never 0 (0: not resumable)
        sent_rounds_.emplace(pages_per_block(machine_.memory()));
        header.features |= kFeatureResumable;
    }
    header_features_ = header.features;
    stream::ByteStream& st = conn_->stream();
    if (auto w = st.write(encode_header(header)); !w) return w.error();
    if (session_id_ != 0) {
        if (auto w = send_session(st, static_cast<uint32_t>(options_.params.resume_window_ms)); !w) return w.error();
    }
    if (auto f = st.flush(); !f) return f.error();
    if (!conn_->answers()) return Result<uint32_t>(0);
    auto answer = header_answer(st);
    answered_ = answer.ok();
    return answer;
}

// What the settings ask of the connection that it cannot give, refused before the header goes.
Status MigrationSource::check_connection() const {
    if (options_.caps.postcopy_ram && !conn_->carries_postcopy()) {
        // A transport with a RAM channel of its own needs a postcopy channel too (RDMA agrees
        // one with its peer); multifd's lanes leave postcopy to the main stream.
        return Error(fmt::format("postcopy-ram needs a postcopy channel, and {} has none: over rdma: turn postcopy-ram "
                                 "on at the destination too (before migrate_incoming)",
                                 conn_->describe()));
    }
    // A transport with a postcopy channel (rdma) keeps the answers apart already; one without
    // either (a plugin's plain stream) cannot honour postcopy-preempt.
    if (options_.caps.postcopy_ram && options_.caps.postcopy_preempt && conn_->preempt_stream() == nullptr &&
        !conn_->postcopy_channel()) {
        return Error(fmt::format("postcopy-preempt needs a connection of its own for the pages faults wait on, and {} has "
                                 "none: turn postcopy-preempt off on both sides",
                                 conn_->describe()));
    }
    SaveTarget* save = conn_->save_target();
    if (auto base = save != nullptr ? save->builds_on() : std::nullopt; base && base != last_save_) {
        return Error(fmt::format("{}: file-base names a save that is not the last this vmm made, and an incremental save "
                                 "sends what the dirty log gathered since that last one: save in full (file-base \"\"), "
                                 "then build on that file",
                                 conn_->describe()));
    }
    if (options_.caps.postcopy_ram && !conn_->answers()) {
        return Error(fmt::format("postcopy-ram: {} has no destination to run the guest while the rest of its RAM comes; "
                                 "turn postcopy-ram off to save to a file",
                                 conn_->describe()));
    }
    return {};
}

// HEADER_OK from the destination, with its rehearsed hand-over time (microseconds).
Result<uint32_t> MigrationSource::header_answer(stream::ByteStream& st) {
    // A vmm destination answers the header at once; silence means whatever holds the port is
    // not one (or is stuck), and that is what the user must hear, not a later reset.
    auto answer_within = std::chrono::milliseconds(options_.params.connect_timeout_ms);
    if (auto w = st.await_readable(answer_within); !w) {
        if (cancel_.cancelled()) return w.error();
        return Error(fmt::format("{} accepted the connection but did not answer the migration header within {} ms "
                                 "(x-connect-timeout): is a vmm destination listening there, or something else?",
                                 uri_.text, answer_within.count()));
    }
    auto reply = read_reply(st);
    if (!reply && cancel_.cancelled()) return reply.error();
    if (!reply) {
        return Error(fmt::format("the destination refused the migration stream: it hung up without answering the header "
                                 "(a destination that is not vmm, such as QEMU, cannot load vmm's stream; its log says "
                                 "why): {}",
                                 reply.error().message()));
    }
    if (reply->type == ReplyType::refused) return Error("the destination refused the migration: " + reply->reason);
    if (reply->type != ReplyType::header_ok) return Error("the destination answered the header out of turn");
    return reply->handover_us;
}

Result<std::vector<std::vector<uint64_t>>> MigrationSource::take_dirty() {
    if (auto s = machine_.dirty_rate().sync_now(); !s) return s.error();
    std::vector<std::vector<uint64_t>> out;
    for (const auto& b : machine_.memory().blocks()) {
        out.emplace_back();
        b->dirty().take(out.back());
    }
    std::lock_guard lock(mutex_);
    ++stats_.ram.dirty_sync_count;
    return out;
}

void MigrationSource::update_remaining(uint64_t dirty_pages) {
    std::lock_guard lock(mutex_);
    stats_.ram.remaining = dirty_pages * memory::kPageSize;
}

static uint64_t count_pages(const std::vector<std::vector<uint64_t>>& bitmaps) {
    uint64_t n = 0;
    for (const auto& b : bitmaps) n += memory::count_bits(b.data(), b.size());
    return n;
}

static uint64_t pending_pages(const machine::Machine& m) {
    uint64_t n = 0;
    for (const auto& b : m.memory().blocks()) n += b->dirty().count();
    return n;
}

void MigrationSource::publish(const RamStats& work) {
    std::lock_guard lock(mutex_);
    RamStats& r = stats_.ram;
    r.transferred = work.transferred;
    r.in_flight = work.in_flight;
    r.duplicate = work.duplicate;
    r.normal = work.normal;
    r.normal_bytes = work.normal_bytes;
    r.skipped_unpopulated = work.skipped_unpopulated;
    r.bulk_to_send = work.bulk_to_send;
    published_at_ = Clock::now();
    r.remaining = work.remaining;
}

// The first round: the bulk round, or a resumed precopy's (what did not arrive whole, and what
// the guest dirtied meanwhile).
Status MigrationSource::first_round(Run& run) {
    if (run.resend) {
        auto bitmaps = take_for_round(run.round + 1);
        if (!bitmaps) return bitmaps.error();
        for (size_t b = 0; b < bitmaps->size(); ++b)
            for (size_t w = 0; w < (*bitmaps)[b].size(); ++w) (*bitmaps)[b][w] |= (*run.resend)[b][w];
        if (sent_rounds_) sent_rounds_->taken(run.round + 1, *bitmaps);  // the resent pages' contents go now
        run.resend.reset();
        return run.saver.dirty_round(++run.round, *bitmaps);
    }
    // From the first instant the migration is active, all of RAM is the bulk round's to go
    // (query-migrate may sample before the round's first piece publishes its own figure).
    update_remaining(machine_.memory().total_size() / memory::kPageSize);
    // Tracking starts now: what was dirty before is part of the bulk round anyway. An
    // incremental save's first round is what was dirty before: the pages changed since its base.
    auto since = take_dirty();
    if (!since) return since.error();
    if (SaveTarget* save = run.conn->save_target(); save != nullptr && save->builds_on()) {
        return run.saver.dirty_round(0, *since);
    }
    auto pagemap = memory::PagemapReader::open();
    if (!pagemap) log::warn("{}; every page will be scanned", pagemap.error().message());
    return run.saver.bulk_round(pagemap ? &*pagemap : nullptr);
}

Status MigrationSource::precopy(Run& run) {
    {
        std::lock_guard lock(mutex_);
        active_since_ = published_at_ = Clock::now();
    }
    set_status(MigrationStatus::active);
    run.saver.on_progress([this, &run] {
        publish(run.work);
        watch_deadline();
    });
    // migrate_start_postcopy (or x-deadline's postcopy, or its cancel) cuts the round under way
    // short (RamSaver::stop_when); x-postcopy-after-rounds switches at a round's end.
    run.saver.stop_when([this] { return postcopy_requested_.load() || deadline_failure_.has_value(); });
    auto t = Clock::now();
    uint64_t before = run.saver.bytes_sent();
    if (auto s = first_round(run); !s) return s;
    if (deadline_failure_) return *deadline_failure_;
    Convergence conv(options_.params, options_.caps.auto_converge, stats().handover_estimate_ms);
    for (;;) {
        double secs = std::chrono::duration<double>(Clock::now() - t).count();
        uint64_t sent = run.saver.bytes_sent() - before;
        if (auto s = machine_.dirty_rate().sync_now(); !s) return s;
        uint64_t dirty = pending_pages(machine_);
        Decision d = conv.after_round({sent, secs, dirty * memory::kPageSize});
        if (d.limit_unreachable && run.round == 0) {  // said once, after the bulk round
            log::warn("saving and loading the machine state alone took {:.0f} ms when the destination rehearsed it, "
                      "more than downtime-limit {} ms: the downtime will exceed the limit (raise it to allow for this)",
                      stats().handover_estimate_ms, options_.params.downtime_limit_ms);
        }
        if (auto s = keep_deadline(conv, d, dirty * memory::kPageSize); !s) return s;
        machine_.set_throttle(d.throttle_percent);
        publish(run.work);
        {
            std::lock_guard lock(mutex_);
            stats_.rounds = run.round + 1;
            stats_.ram.remaining = dirty * memory::kPageSize;
            stats_.ram.mbps = d.bandwidth * 8 / 1e6;
            stats_.ram.pages_per_second = d.bandwidth / memory::kPageSize;
            stats_.ram.dirty_pages_rate = secs > 0 ? static_cast<double>(dirty) / secs : 0;
            stats_.expected_downtime_ms = static_cast<uint64_t>(d.expected_downtime_ms);
            stats_.cpu_throttle_percentage = d.throttle_percent;
            if (stats_.round_log.size() < kRoundLogMax) stats_.round_log.push_back({run.round, sent, secs, dirty});
        }
        // Asked for, postcopy comes now (the round stopped short) even if the rest would fit
        // the downtime (QEMU would finish in precopy then): the user chose when the guest moves.
        if (switch_now(run.round)) {
            switching_ = true;
            return {};
        }
        if (d.complete) return {};
        auto bitmaps = take_for_round(run.round + 1);
        if (!bitmaps) return bitmaps.error();
        t = Clock::now();
        before = run.saver.bytes_sent();
        if (auto s = run.saver.dirty_round(++run.round, *bitmaps); !s) return s;
        if (deadline_failure_) return *deadline_failure_;
    }
}

Result<uint64_t> MigrationSource::hand_over(Run& run, DowntimeParts& parts, RecordType last) {
    auto t = Clock::now();
    auto state = save_machine_state(machine_);
    if (!state) return state.error();
    stream::ByteStream& st = run.conn->stream();
    Record rec;
    rec.type = RecordType::state;
    rec.length = state->size();
    Record end;
    end.type = last;
    auto header = encode_record(rec);
    auto end_bytes = encode_record(end);
    std::span<const uint8_t> all[] = {header, *state, end_bytes};
    if (auto s = st.write(std::span<const std::span<const uint8_t>>(all)); !s) return s.error();
    if (auto s = st.flush(); !s) return s.error();
    cut_at(1);
    auto sent = Clock::now();
    parts.state = ms_between(t, sent);
    if (run.conn->answers()) {  // a file has nobody to load the state: GO follows it there
        auto reply = read_reply(st);
        if (!reply) return reply.error().context("waiting for the destination to load the state");
        if (reply->type == ReplyType::refused) return Error("the destination could not load the state: " + reply->reason);
        if (reply->type != ReplyType::ready) return Error("the destination answered out of turn");
    }
    auto ready = Clock::now();
    parts.destination = ms_between(sent, ready);
    cut_at(2);
    // From the first byte of GO on, the destination may run the guest: a break now is settled by
    // asking it (source_switchover.cc), never by running the guest here again.
    went_go_ = true;
    if (auto s = st.write(encode_reply(was_running_ ? ReplyType::go : ReplyType::go_paused)); !s) return s.error();
    if (auto s = st.flush(); !s) return s.error();
    cut_at(3);
    parts.go = ms_between(ready, Clock::now());
    return state->size();
}

Status MigrationSource::complete(Run& run) {
    set_status(MigrationStatus::device);
    uint64_t precopy_bytes = run.work.transferred;
    DowntimeParts parts;
    auto paused_at = Clock::now();
    machine_.pause();
    paused_by_us_ = true;
    run.limiter.unpaced();  // the guest is stopped: send as fast as the link allows
    auto bitmaps = take_for_round(run.round + 1);
    if (!bitmaps) return bitmaps.error();
    update_remaining(count_pages(*bitmaps));
    uint64_t before = run.saver.bytes_sent();
    auto round_start = Clock::now();
    parts.pause = ms_between(paused_at, round_start);
    if (auto s = run.saver.dirty_round(++run.round, *bitmaps); !s) return s;
    RoundStats last{run.round, run.saver.bytes_sent() - before,
                    std::chrono::duration<double>(Clock::now() - round_start).count(), 0};
    parts.last_round = last.seconds * 1000;
    auto state_bytes = hand_over(run, parts);
    bool settled = false;
    if (!state_bytes && went_go_ && session_id_ != 0 && !cancel_.cancelled()) {
        // GO may have gone: the guest stays paused here until the destination says what it holds.
        paused_by_us_ = false;
        if (auto s = settle_in_doubt(run, state_bytes.error()); !s) return s;
        state_bytes = uint64_t{0}, settled = true;
    }
    if (!state_bytes) return state_bytes.error();
    paused_by_us_ = false;
    machine_.set_throttle(0);
    auto downtime = ms_since(paused_at);
    if (run.conn->answers() && session_id_ != 0 && !settled) {
        if (auto s = confirm_running(run); !s) return s;
    }
    if (run.conn->answers()) {
        // From here on the destination runs the guest: this side must never resume it.
        machine_.refuse_resume(kMovedAway);
        machine_.set_postmigrate();
    } else if (auto s = saved(run); !s) {
        return s;
    }
    publish(run.work);
    {
        std::lock_guard lock(mutex_);
        stats_.downtime_ms = downtime;
        stats_.downtime_parts = parts;
        stats_.total_time_ms = ms_since(start_);
        stats_.ram.remaining = 0;
        stats_.ram.precopy_bytes = precopy_bytes;
        stats_.ram.downtime_bytes = run.work.transferred - precopy_bytes + *state_bytes;
        stats_.rounds = run.round + 1;
        stats_.cpu_throttle_percentage = 0;
        if (stats_.round_log.size() < kRoundLogMax) stats_.round_log.push_back(last);
    }
    set_status(MigrationStatus::completed);
    return {};
}

// Saved to a file: every page is written, so the guest runs on (as it was: a paused one stays
// paused) while the file is synced and named; a commit that fails leaves it running, no file.
Status MigrationSource::saved(Run& run) {
    if (was_running_) {
        if (auto s = machine_.resume(); !s) return s;
    }
    SaveTarget* save = run.conn->save_target();
    if (save == nullptr) return Error(fmt::format("internal: {} was saved to as a file, and is none", run.conn->describe()));
    if (auto s = save->commit(); !s) return s;
    saved_id_ = save->save_id();
    log::info("saved the guest to {}", run.conn->describe());
    return {};
}

}  // namespace vmm::migration
