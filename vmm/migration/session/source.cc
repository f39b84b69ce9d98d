#include "vmm/migration/session/source.h"

#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/common/thread_name.h"
#include "vmm/memory/populated.h"
#include "vmm/migration/precopy/convergence.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/stream/tls_stream.h"
#include "vmm/migration/precopy/ram_saver.h"
#include "vmm/migration/transport/file_ram.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/multifd_wire.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;

uint64_t count_pages(const SourceCore::Bitmaps& bitmaps) {
    uint64_t n = 0;
    for (const auto& b : bitmaps) n += memory::count_bits(b.data(), b.size());
    return n;
}

uint64_t pending_pages(const machine::Machine& m) {
    uint64_t n = 0;
    for (const auto& b : m.memory().blocks()) n += b->dirty().count();
    return n;
}
}  // namespace

MigrationSource::MigrationSource(machine::Machine& m, Transport& transport, Uri uri, Options options,
                                 std::shared_ptr<const LiveSettings> live, stream::CancelToken cancel, StatusFn on_status)
    : core_(m, transport, std::move(uri), std::move(options), std::move(live), std::move(cancel), std::move(on_status)) {}

MigrationSource::~MigrationSource() {
    core_.cancel.cancel();
    if (thread_.joinable()) thread_.join();
}

void MigrationSource::start(std::chrono::steady_clock::time_point asked) {
    core_.start = asked;
    core_.set_status(MigrationStatus::setup);
    thread_ = std::thread([this] { run(); });
}

void MigrationSource::cancel() {
    {
        std::lock_guard lock(core_.mutex);
        if (is_terminal(core_.stats.status)) return;
    }
    core_.set_status(MigrationStatus::cancelling);
    core_.cancel.cancel();
}

// The figures as they are now, with the time left (eta.h).
MigrationStats MigrationSource::stats() const {
    std::lock_guard lock(core_.mutex);
    MigrationStats s = core_.stats;
    if (!is_terminal(s.status)) s.total_time_ms = ms_since(core_.start);
    if (core_.conn && tls_wanted(core_.options.params)) s.tls_key_updates = stream::tls_key_updates(core_.conn->stream());
    postcopy_.report(s);
    if (s.status == MigrationStatus::active) {
        EtaFacts f = core_.precopy_facts(s);
        s.eta = precopy_eta(f);
        s.eta_link_bytes_per_s = f.link_bytes_per_s;
        s.eta_dirty_bytes_per_s = f.dirty_bytes_per_s;
    }
    return s;
}

Status MigrationSource::resume(Transport& transport, Uri uri) {
    {
        std::lock_guard lock(core_.mutex);
        if (core_.stats.status == MigrationStatus::precopy_paused) {  // tried from now on, within x-resume-window
            core_.resume_to = ResumeTo{&transport, std::move(uri)};
            core_.resume_cv.notify_all();
            return {};
        }
        if (core_.stats.status != MigrationStatus::postcopy_paused) {
            return Error(fmt::format("'migrate -r' resumes a migration whose link broke (precopy-paused or "
                                     "postcopy-paused); this one is {}",
                                     to_string(core_.stats.status)));
        }
        if (core_.machine.run().state() != machine::RunState::postmigrate) {
            return Error("the guest has run here since postcopy paused ('cont -f'): it has forked, and cannot be resumed "
                         "there");
        }
        core_.resume_to = ResumeTo{&transport, std::move(uri)};
        // postcopy-recover from the moment 'migrate -r' answers: whoever asks next (vmmd, right
        // after it) must not read the pause being resumed as the resume's own failure.
        core_.stats.status = MigrationStatus::postcopy_recover;
    }
    if (core_.on_status && core_.options.caps.events) core_.on_status(MigrationStatus::postcopy_recover);
    core_.resume_cv.notify_all();
    return {};
}

Status MigrationSource::pause_link() {
    std::lock_guard lock(core_.mutex);
    bool resumable_precopy =
        core_.stats.status == MigrationStatus::active && resumption_.resumable() && resumption_.answered();
    if ((core_.stats.status != MigrationStatus::postcopy_active && !resumable_precopy) || !core_.conn) {
        return Error(fmt::format("migrate_pause pauses a migration in postcopy-active, or in precopy (active) over "
                                 "tcp/unix with x-resume-window; this one is {}",
                                 to_string(core_.stats.status)));
    }
    return core_.conn->cut();
}

void MigrationSource::fail(const Error& e) {
    // Give the guest back first, unthrottled: a failed migration must never leave the source
    // stopped or slowed.
    core_.give_guest_back();
    bool cancelled = core_.cancel.cancelled();
    {
        std::lock_guard lock(core_.mutex);
        core_.stats.error = cancelled ? "cancelled by the user" : e.message();
        core_.stats.total_time_ms = ms_since(core_.start);
        core_.stats.cpu_throttle_percentage = 0;
    }
    const std::string& to = core_.uri.text;
    if (postcopy_.went() && core_.machine.run().state() != machine::RunState::postmigrate) {
        // Forced to run here ('cont -f') while postcopy was paused: the user took this copy back.
        log::error("postcopy to {} ended: {}", to, e.message());
        core_.set_status(MigrationStatus::failed);
        return;
    }
    if (postcopy_.went()) {
        // The guest ran on at the destination: it is split between the two sides, and running
        // it here would fork it. The source keeps it paused with the RAM it had at the switch.
        log::error("postcopy to {} broke: {}; the source keeps the guest paused with all of its RAM as at the switch "
                   "('cont -f' would run it here, forking it)",
                   to, e.message());
        core_.machine.run().refuse_resume(fmt::format("postcopy to {} broke after the guest ran on there ({}): running the "
                                                "copy here would fork it; 'cont -f' forces it",
                                                to, e.message()));
        core_.set_status(MigrationStatus::postcopy_paused);
        return;
    }
    if (!cancelled) log::error("migration to {} failed: {}", to, e.message());
    core_.set_status(cancelled ? MigrationStatus::cancelled : MigrationStatus::failed);
}

void MigrationSource::run() {
    name_this_thread("migration");
    core_.was_running = core_.machine.run().state() == machine::RunState::running;
    core_.machine.control().start_migration_window();  // the guest's stalls are timed from here
    Connection* conn = nullptr;
    Status s = setup(conn);
    if (s) {
        SourceRun r(core_, *conn);
        for (;;) {
            s = precopy(r);
            if (s) s = postcopy_.switching() ? postcopy_.run(r) : complete(r);
            bool in_precopy = !switchover_.went_go() && !postcopy_.went() && !postcopy_.switching();
            if (s || !resumption_.link_broke(r, in_precopy)) break;
            if (s = resumption_.ride_out(r, s.error()); !s) break;  // resumed: the rounds go on from what arrived
        }
    }
    if (!s) {
        fail(s.error());
        if (core_.conn) core_.conn->abort(s.error().message());  // a destination still there hears why at once
        if (!postcopy_.went()) resumption_.say_goodbye();
    }
    std::unique_ptr<Connection> closing;
    {
        std::lock_guard lock(core_.mutex);
        if (core_.conn && tls_wanted(core_.options.params))
            core_.stats.tls_key_updates = stream::tls_key_updates(core_.conn->stream());
        closing = std::move(core_.conn);
        core_.broken.clear();
    }
    closing.reset();  // closes the connection; the destination sees the end
    finished_ = true;
}
// Setup, from the migrate command until the first round may begin, timed step by step (the
// transport's own steps inside its own): the connection, the header the destination checks and
// answers (rehearsing the hand-over), and the RAM channel's setup with its peer.
Status MigrationSource::setup(Connection*& conn_out) {
    PartClock clock(core_.start);
    clock.mark("start");  // the command until this thread began
    auto conn = core_.transport->connect(context_for(core_.machine, core_.uri, [o = core_.options] { return o; }, core_.cancel));
    if (!conn) return conn.error();
    {
        std::lock_guard lock(core_.mutex);
        core_.conn = std::move(*conn);
    }
    std::vector<SetupPart> connect_steps = core_.conn->setup_parts();
    clock.mark("connect", connect_steps);
    resumption_.first_connect_took(clock.parts.back().ms);
    log::info("migrating to {}", core_.conn->describe());
    auto handover_us = negotiate();
    if (!handover_us) return handover_us.error();
    clock.mark("header");
    if (SourceRamChannel* channel = core_.conn->source_ram(); channel != nullptr)
        if (auto s = channel->setup(); !s) return s;
    std::vector<SetupPart> steps = core_.conn->setup_parts();
    steps.erase(steps.begin(), steps.begin() + static_cast<long>(std::min(connect_steps.size(), steps.size())));
    clock.mark("ram-setup", std::move(steps));
    std::lock_guard lock(core_.mutex);
    core_.stats.handover_estimate_ms = *handover_us / 1000.0;
    core_.stats.setup_time_ms = static_cast<uint64_t>(total_ms(clock.parts));  // the parts tile it: one clock, no gap
    core_.stats.setup_parts = std::move(clock.parts);
    conn_out = core_.conn.get();
    return {};
}

// The header, with what it announces (RAM mode, verify-ram, postcopy) checked against what the
// connection can carry, and the destination's answer: its rehearsed hand-over time (us).
Result<uint32_t> MigrationSource::negotiate() {
    RamMode mode = core_.conn->source_ram() != nullptr ? RamMode::transport_channel : RamMode::inline_pages;
    StreamHeader header = header_for(core_.machine, mode);
    auto key = core_.conn->sums_key();
    if (!key) return key.error();
    core_.summer = *key ? PageSummer(**key) : PageSummer();
    if (core_.summer.keyed() && (core_.conn->source_ram() == nullptr || !core_.conn->source_ram()->carries_sums())) {
        return Error(fmt::format("{} is authenticated but carries no RAM sums to authenticate the pages with", core_.conn->describe()));
    }
    header.features = core_.sums_on() ? kFeatureVerifyRam : 0;
    core_.verify = core_.verify_for(*core_.conn);
    if (core_.verify == RamSaver::Verify::round_sums) header.features |= kFeatureRoundSums;
    if (core_.verify == RamSaver::Verify::channel_sums) header.features |= kFeatureChannelSums;
    if (auto s = check_connection(); !s) return s.error();
    if (core_.options.caps.postcopy_ram) header.features |= kFeaturePostcopy;
    core_.round_landed = mode == RamMode::transport_channel && core_.conn->answers();
    if (core_.round_landed) header.features |= kFeatureRoundLanded;
    if (auto s = resumption_.begin(header); !s) return s.error();
    stream::ByteStream& st = core_.conn->stream();
    if (auto w = st.write(encode_header(header)); !w) return w.error();
    if (resumption_.resumable()) {
        if (auto w = resumption_.send_session(st, static_cast<uint32_t>(core_.options.params.resume_window_ms)); !w) return w.error();
    }
    if (auto f = st.flush(); !f) return f.error();
    if (!core_.conn->answers()) return Result<uint32_t>(0);
    auto answer = header_answer(st);
    resumption_.set_answered(answer.ok());
    return answer;
}

// What the settings ask of the connection that it cannot give, refused before the header goes.
Status MigrationSource::check_connection() const {
    if (core_.options.caps.postcopy_ram && !core_.conn->carries_postcopy()) {
        // A transport with a RAM channel of its own needs a postcopy channel too (RDMA agrees
        // one with its peer); multifd's lanes leave postcopy to the main stream.
        return Error(fmt::format("postcopy-ram needs a postcopy channel, and {} has none: over rdma: turn postcopy-ram "
                                 "on at the destination too (before migrate_incoming)",
                                 core_.conn->describe()));
    }
    // A transport with a postcopy channel (rdma) keeps the answers apart already; one without
    // either (a plugin's plain stream) cannot honour postcopy-preempt.
    if (core_.options.caps.postcopy_ram && core_.options.caps.postcopy_preempt && core_.conn->preempt_stream() == nullptr &&
        !core_.conn->postcopy_channel()) {
        return Error(fmt::format("postcopy-preempt needs a connection of its own for the pages faults wait on, and {} has "
                                 "none: turn postcopy-preempt off on both sides",
                                 core_.conn->describe()));
    }
    SaveTarget* save = core_.conn->save_target();
    if (auto base = save != nullptr ? save->builds_on() : std::nullopt; base && base != last_save_) {
        return Error(fmt::format("{}: file-base names a save that is not the last this vmm made, and an incremental save "
                                 "sends what the dirty log gathered since that last one: save in full (file-base \"\"), "
                                 "then build on that file",
                                 core_.conn->describe()));
    }
    if (core_.options.caps.postcopy_ram && !core_.conn->answers()) {
        return Error(fmt::format("postcopy-ram: {} has no destination to run the guest while the rest of its RAM comes; "
                                 "turn postcopy-ram off to save to a file",
                                 core_.conn->describe()));
    }
    return {};
}

// HEADER_OK from the destination, with its rehearsed hand-over time (microseconds).
Result<uint32_t> MigrationSource::header_answer(stream::ByteStream& st) {
    // A vmm destination answers the header at once; silence means whatever holds the port is
    // not one (or is stuck), and that is what the user must hear, not a later reset.
    auto answer_within = std::chrono::milliseconds(core_.options.params.connect_timeout_ms);
    if (auto w = st.await_readable(answer_within); !w) {
        if (core_.cancel.cancelled()) return w.error();
        return Error(fmt::format("{} accepted the connection but did not answer the migration header within {} ms "
                                 "(x-connect-timeout): is a vmm destination listening there, or something else?",
                                 core_.uri.text, answer_within.count()));
    }
    auto reply = read_reply(st);
    if (!reply && core_.cancel.cancelled()) return reply.error();
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

// The first round: the bulk round, or a resumed precopy's (what did not arrive whole, and what
// the guest dirtied meanwhile).
Status MigrationSource::first_round(SourceRun& run) {
    if (run.resend) {
        auto bitmaps = resumption_.take_for_round(run.round + 1);
        if (!bitmaps) return bitmaps.error();
        for (size_t b = 0; b < bitmaps->size(); ++b)
            for (size_t w = 0; w < (*bitmaps)[b].size(); ++w) (*bitmaps)[b][w] |= (*run.resend)[b][w];
        resumption_.resent_in(run.round + 1, *bitmaps);  // the resent pages' contents go now
        run.resend.reset();
        return run.saver.dirty_round(++run.round, *bitmaps);
    }
    // From the first instant the migration is active, all of RAM is the bulk round's to go
    // (query-migrate may sample before the round's first piece publishes its own figure).
    core_.update_remaining(core_.machine.memory().total_size() / memory::kPageSize);
    // Tracking starts now: what was dirty before is part of the bulk round anyway. An
    // incremental save's first round is what was dirty before: the pages changed since its base.
    auto since = core_.take_dirty();
    if (!since) return since.error();
    if (SaveTarget* save = run.conn->save_target(); save != nullptr && save->builds_on()) {
        return run.saver.dirty_round(0, *since);
    }
    auto pagemap = memory::PagemapReader::open();
    if (!pagemap) log::warn("{}; every page will be scanned", pagemap.error().message());
    return run.saver.bulk_round(pagemap ? &*pagemap : nullptr);
}

Status MigrationSource::precopy(SourceRun& run) {
    {
        std::lock_guard lock(core_.mutex);
        core_.active_since = core_.published_at = Clock::now();
    }
    core_.set_status(MigrationStatus::active);
    run.saver.on_progress([this, &run] {
        core_.publish(run.work);
        deadline_.watch();
    });
    // migrate_start_postcopy (or x-deadline's postcopy, or its cancel) cuts the round under way
    // short (RamSaver::stop_when); x-postcopy-after-rounds switches at a round's end.
    run.saver.stop_when([this] { return postcopy_.requested() || deadline_.failure().has_value(); });
    auto t = Clock::now();
    uint64_t before = run.saver.bytes_sent();
    if (auto s = first_round(run); !s) return s;
    if (deadline_.failure()) return *deadline_.failure();
    Convergence conv(core_.options.params, core_.options.caps.auto_converge, stats().handover_estimate_ms);
    for (;;) {
        double secs = std::chrono::duration<double>(Clock::now() - t).count();
        uint64_t sent = run.saver.bytes_sent() - before;
        if (auto s = core_.machine.dirty_rate().sync_now(); !s) return s;
        uint64_t dirty = pending_pages(core_.machine);
        Decision d = conv.after_round({sent, secs, dirty * memory::kPageSize});
        if (d.limit_unreachable && run.round == 0) {  // said once, after the bulk round
            log::warn("saving and loading the machine state alone took {:.0f} ms when the destination rehearsed it, "
                      "more than downtime-limit {} ms: the downtime will exceed the limit (raise it to allow for this)",
                      stats().handover_estimate_ms, core_.options.params.downtime_limit_ms);
        }
        if (auto s = deadline_.keep(conv, d, dirty * memory::kPageSize); !s) return s;
        core_.machine.vcpus().set_throttle(d.throttle_percent);
        after_round(run, d, sent, secs, dirty);
        // Asked for, postcopy comes now (the round stopped short) even if the rest would fit
        // the downtime (QEMU would finish in precopy then): the user chose when the guest moves.
        if (postcopy_.due_after(run.round)) return {};
        if (d.complete) return {};
        auto bitmaps = resumption_.take_for_round(run.round + 1);
        if (!bitmaps) return bitmaps.error();
        t = Clock::now();
        before = run.saver.bytes_sent();
        if (auto s = run.saver.dirty_round(++run.round, *bitmaps); !s) return s;
        if (deadline_.failure()) return *deadline_.failure();
    }
}

void MigrationSource::after_round(const SourceRun& run, const Decision& d, uint64_t sent, double secs, uint64_t dirty) {
    core_.publish(run.work);
    std::lock_guard lock(core_.mutex);
    MigrationStats& st = core_.stats;
    st.rounds = run.round + 1;
    st.ram.remaining = dirty * memory::kPageSize;
    st.ram.mbps = d.bandwidth * 8 / 1e6;
    st.ram.pages_per_second = d.bandwidth / memory::kPageSize;
    st.ram.dirty_pages_rate = secs > 0 ? static_cast<double>(dirty) / secs : 0;
    st.expected_downtime_ms = static_cast<uint64_t>(d.expected_downtime_ms);
    st.cpu_throttle_percentage = d.throttle_percent;
    if (st.round_log.size() < kRoundLogMax) st.round_log.push_back({run.round, sent, secs, dirty});
}

Status MigrationSource::complete(SourceRun& run) {
    // The last round runs with the guest paused, and nothing may cut it short: a postcopy asked
    // for, or a deadline passing, now would hand over a guest without the pages left unsent.
    run.saver.stop_when({});
    run.saver.on_progress([this, &run] { core_.publish(run.work); });
    core_.set_status(MigrationStatus::device);
    uint64_t precopy_bytes = run.work.transferred;
    DowntimeParts parts;
    auto paused_at = Clock::now();
    core_.machine.run().pause();
    core_.paused_by_us = true;
    run.limiter.unpaced();  // the guest is stopped: send as fast as the link allows
    auto bitmaps = resumption_.take_for_round(run.round + 1);
    if (!bitmaps) return bitmaps.error();
    core_.update_remaining(count_pages(*bitmaps));
    uint64_t before = run.saver.bytes_sent();
    auto round_start = Clock::now();
    parts.pause = ms_between(paused_at, round_start);
    if (auto s = run.saver.dirty_round(++run.round, *bitmaps); !s) return s;
    RoundStats last{run.round, run.saver.bytes_sent() - before,
                    std::chrono::duration<double>(Clock::now() - round_start).count(), 0};
    parts.last_round = last.seconds * 1000;
    auto state_bytes = switchover_.hand_over(run, parts);
    bool settled = false;
    if (!state_bytes && switchover_.went_go() && resumption_.resumable() && !core_.cancel.cancelled()) {
        // GO may have gone: the guest stays paused here until the destination says what it holds.
        core_.paused_by_us = false;
        if (auto s = switchover_.settle_in_doubt(run, state_bytes.error()); !s) return s;
        state_bytes = uint64_t{0}, settled = true;
    }
    if (!state_bytes) return state_bytes.error();
    core_.paused_by_us = false;
    core_.release_throttles();
    auto downtime = ms_since(paused_at);
    if (run.conn->answers() && resumption_.resumable() && !settled) {
        if (auto s = switchover_.confirm_running(run); !s) return s;
    }
    if (run.conn->answers()) {
        // From here on the destination runs the guest: this side must never resume it.
        core_.machine.run().refuse_resume(kMovedAway);
        core_.machine.run().set_postmigrate();
    } else if (auto s = saved(run); !s) {
        return s;
    }
    core_.publish(run.work);
    {
        std::lock_guard lock(core_.mutex);
        core_.stats.downtime_ms = downtime;
        core_.stats.downtime_parts = parts;
        core_.stats.total_time_ms = ms_since(core_.start);
        core_.stats.ram.remaining = 0;
        core_.stats.ram.precopy_bytes = precopy_bytes;
        core_.stats.ram.downtime_bytes = run.work.transferred - precopy_bytes + *state_bytes;
        core_.stats.rounds = run.round + 1;
        core_.stats.cpu_throttle_percentage = 0;
        if (core_.stats.round_log.size() < kRoundLogMax) core_.stats.round_log.push_back(last);
    }
    core_.set_status(MigrationStatus::completed);
    return {};
}

// Saved to a file: every page is written, so the guest runs on (as it was: a paused one stays
// paused) while the file is synced and named; a commit that fails leaves it running, no file.
Status MigrationSource::saved(SourceRun& run) {
    if (core_.was_running) {
        if (auto s = core_.machine.run().resume(); !s) return s;
    }
    SaveTarget* save = run.conn->save_target();
    if (save == nullptr) return Error(fmt::format("internal: {} was saved to as a file, and is none", run.conn->describe()));
    if (auto s = save->commit(); !s) return s;
    saved_id_ = save->save_id();
    log::info("saved the guest to {}", run.conn->describe());
    return {};
}

}  // namespace vmm::migration
