// MigrationSource's postcopy phase (source.h): the switch, the request-first sender, and the
// recovery of a link that broke (postcopy-paused, migrate -r, postcopy-recover).
#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/memory/dirty_bitmap.h"
#include "vmm/migration/postcopy/recovery.h"
#include "vmm/migration/postcopy/sender.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/session/source.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;
}  // namespace

// Runs of the pages the destination must drop and fetch again: dirty since they were sent.
Status MigrationSource::send_discards(stream::ByteStream& st, const std::vector<std::vector<uint64_t>>& bitmaps) {
    std::vector<uint8_t> all;
    for (uint32_t b = 0; b < bitmaps.size(); ++b) {
        uint64_t pages = machine_.memory().blocks()[b]->pages();
        for (auto run = memory::next_run(bitmaps[b], 0, pages); run.count != 0;
             run = memory::next_run(bitmaps[b], run.first + run.count, pages)) {
            Record r;
            r.type = RecordType::discard;
            r.block = b;
            r.offset = run.first * memory::kPageSize;
            r.length = run.count * memory::kPageSize;
            auto bytes = encode_record(r);
            all.insert(all.end(), bytes.begin(), bytes.end());
        }
    }
    return st.write(all);
}

Status MigrationSource::postcopy(Run& run) {
    DowntimeParts parts;
    auto paused_at = Clock::now();
    machine_.pause();
    paused_by_us_ = true;
    auto bitmaps = take_dirty();  // what changed since it was sent: the destination must not keep it
    if (!bitmaps) return bitmaps.error();
    if (run.saver.cut_short()) {  // ... and what the round stopped short of: the destination never had it
        const auto& unsent = run.saver.unsent();
        for (size_t b = 0; b < bitmaps->size() && b < unsent.size(); ++b)
            for (size_t w = 0; w < (*bitmaps)[b].size() && w < unsent[b].size(); ++w) (*bitmaps)[b][w] |= unsent[b][w];
    }
    parts.pause = ms_between(paused_at, Clock::now());
    if (auto s = send_discards(run.conn->stream(), *bitmaps); !s) return s;
    auto state_bytes = hand_over(run, parts, RecordType::postcopy);
    if (!state_bytes) return state_bytes.error();
    paused_by_us_ = false;  // GO went: the destination runs the guest, this side never again
    went_postcopy_ = true;
    machine_.refuse_resume("the guest runs on the destination in postcopy, which still lacks pages only this side has: "
                           "running it here too would fork it ('cont -f' forces it)");
    machine_.set_throttle(0);
    machine_.set_postmigrate();
    std::vector<BlockInfo> blocks = header_for(machine_).blocks;
    PostcopySender sender(machine_.memory(), run.conn->source_postcopy({blocks, sums_on()}), blocks,
                          std::move(*bitmaps), cancel_, *live_, {options_.caps.zero_blocks});
    uint64_t precopy_bytes = run.work.transferred;
    {
        std::lock_guard lock(mutex_);
        stats_.downtime_ms = ms_since(paused_at);
        stats_.downtime_parts = parts;
        stats_.ram.precopy_bytes = precopy_bytes;
        stats_.ram.downtime_bytes = *state_bytes;
        stats_.cpu_throttle_percentage = 0;
        sender_ = &sender;
        switched_at_ = Clock::now();
    }
    set_status(MigrationStatus::postcopy_active);
    Status s = sender.run();
    while (!s && !cancel_.cancelled()) {  // the link broke: both sides keep their state
        if (auto r = recover_link(sender, s.error()); !r) {
            s = r;  // given up: the guest was forced to run here
            break;
        }
        s = sender.run();
    }
    {
        std::lock_guard lock(mutex_);
        stats_.postcopy = sender.stats();
        stats_.postcopy.switch_ms = stats_.downtime_ms;
        stats_.ram.transferred = run.work.transferred + *state_bytes + stats_.postcopy.postcopy_bytes;
        stats_.ram.remaining = sender.remaining_pages() * memory::kPageSize;
        stats_.total_time_ms = ms_since(start_);
        sender_ = nullptr;
    }
    if (!s) return s;
    machine_.refuse_resume(kMovedAway);  // as after precopy: the guest has moved
    set_status(MigrationStatus::completed);
    return {};
}

Status MigrationSource::resume(Transport& transport, Uri uri) {
    {
        std::lock_guard lock(mutex_);
        if (stats_.status == MigrationStatus::precopy_paused) {  // tried from now on, within x-resume-window
            resume_to_ = ResumeTo{&transport, std::move(uri)};
            resume_cv_.notify_all();
            return {};
        }
        if (stats_.status != MigrationStatus::postcopy_paused) {
            return Error(fmt::format("'migrate -r' resumes a migration whose link broke (precopy-paused or "
                                     "postcopy-paused); this one is {}",
                                     to_string(stats_.status)));
        }
        if (machine_.run_state() != machine::RunState::postmigrate) {
            return Error("the guest has run here since postcopy paused ('cont -f'): it has forked, and cannot be resumed "
                         "there");
        }
        resume_to_ = ResumeTo{&transport, std::move(uri)};
        // postcopy-recover from the moment 'migrate -r' answers: whoever asks next (vmmd, right
        // after it) must not read the pause being resumed as the resume's own failure.
        stats_.status = MigrationStatus::postcopy_recover;
    }
    if (on_status_ && options_.caps.events) on_status_(MigrationStatus::postcopy_recover);
    resume_cv_.notify_all();
    return {};
}

Status MigrationSource::pause_link() {
    std::lock_guard lock(mutex_);
    bool resumable_precopy = stats_.status == MigrationStatus::active && session_id_ != 0 && answered_;
    if ((stats_.status != MigrationStatus::postcopy_active && !resumable_precopy) || !conn_) {
        return Error(fmt::format("migrate_pause pauses a migration in postcopy-active, or in precopy (active) over "
                                 "tcp/unix with x-resume-window; this one is {}",
                                 to_string(stats_.status)));
    }
    return conn_->cut();
}

Status MigrationSource::recover_link(PostcopySender& sender, Error why) {
    sender.detach();  // nothing reads the dead link any more
    for (;;) {
        log::error("postcopy to {} broke: {}; both sides keep their state: 'migrate_recover URI' on the destination, then "
                   "'migrate -r URI' here resumes it",
                   uri_.text, why.message());
        {
            std::lock_guard lock(mutex_);
            stats_.error = why.message();
            if (conn_) {
                (void)conn_->cut();
                broken_.push_back(std::move(conn_));
            }
        }
        machine_.refuse_resume(fmt::format("postcopy to {} is paused ({}): the destination runs the guest and this side "
                                           "holds pages it lacks; running the copy here would fork it ('cont -f' forces it)",
                                           uri_.text, why.message()));
        set_status(MigrationStatus::postcopy_paused);
        auto to = await_resume();
        if (!to) return to.error();
        set_status(MigrationStatus::postcopy_recover);
        auto s = reconnect(*to, sender);
        if (s) {
            std::lock_guard lock(mutex_);
            stats_.error.clear();
            break;
        }
        why = s.error();
    }
    set_status(MigrationStatus::postcopy_active);
    return {};
}

Result<MigrationSource::ResumeTo> MigrationSource::await_resume() {
    std::unique_lock lock(mutex_);
    for (;;) {
        if (resume_to_) {
            ResumeTo to = std::move(*resume_to_);
            resume_to_.reset();
            return to;
        }
        if (cancel_.cancelled()) return Error("migration cancelled");
        if (machine_.run_state() != machine::RunState::postmigrate) {
            return Error("the guest was resumed here with 'cont -f' while postcopy was paused: this copy and the "
                         "destination's have forked, and the postcopy cannot be recovered");
        }
        resume_cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
}

// A new connection: the resuming header, the destination's answer, then which pages it holds.
Status MigrationSource::reconnect(const ResumeTo& to, PostcopySender& sender) {
    log::info("resuming postcopy over {}", to.uri.text);
    auto conn = to.transport->connect(context_for(machine_, to.uri, [o = options_] { return o; }, cancel_));
    if (!conn) return conn.error();
    stream::ByteStream& st = (*conn)->stream();
    StreamHeader header = header_for(machine_);
    header.features = kFeaturePostcopy | kFeaturePostcopyResume | (sums_on() ? kFeatureVerifyRam : 0);
    if (auto s = st.write(encode_header(header)); !s) return s;
    if (auto s = st.flush(); !s) return s;
    if (auto w = st.await_readable(std::chrono::milliseconds(options_.params.connect_timeout_ms)); !w) {
        return w.error().context(fmt::format("{} did not answer the resumption (is 'migrate_recover' listening there?)",
                                             to.uri.text));
    }
    auto reply = read_reply(st);
    if (!reply) return reply.error().context("the destination hung up on the resumption");
    if (reply->type == ReplyType::refused) return Error("the destination refused to resume postcopy: " + reply->reason);
    if (reply->type != ReplyType::header_ok) return Error("the destination answered the resumption out of turn");
    ReceivedPages received(header.blocks);
    while (!received.complete()) {
        auto m = read_return(st, header.blocks, kStreamPageSize);
        if (!m) return m.error().context("postcopy recovery");
        if (auto s = received.add(m->message, m->words); !s) return s;
    }
    {
        std::lock_guard lock(mutex_);
        conn_ = std::move(*conn);
        stats_.uri = to.uri.text;
    }
    uri_ = to.uri;
    sender.resume(conn_->source_postcopy({header.blocks, sums_on()}), received.bits());
    log::info("postcopy resumed over {}", conn_->describe());
    return {};
}

}  // namespace vmm::migration
