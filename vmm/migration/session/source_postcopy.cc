// PostcopyPhase (source_postcopy.h).
#include "vmm/migration/session/source_postcopy.h"

#include <optional>

#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/memory/dirty_bitmap.h"
#include "vmm/migration/postcopy/recovery.h"
#include "vmm/migration/postcopy/sender.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;
}  // namespace

Status PostcopyPhase::start() {
    if (!core_.options.caps.postcopy_ram) {
        return Error("this migration cannot switch to postcopy: set the postcopy-ram capability on both sides before "
                     "'migrate'");
    }
    MigrationStatus st;
    {
        std::lock_guard lock(core_.mutex);
        st = core_.stats.status;
    }
    if (st != MigrationStatus::setup && st != MigrationStatus::active) {
        return Error(fmt::format("no precopy migration to switch to postcopy (status {})", to_string(st)));
    }
    requested_ = true;
    return {};
}

bool PostcopyPhase::due_after(uint32_t round) {
    if (!core_.options.caps.postcopy_ram) return false;
    // `round` is the last round sent: 0 is the bulk round, so N rounds are done at round N - 1.
    uint64_t after = core_.options.params.postcopy_after_rounds;
    switching_ = requested_ || (after != 0 && round + 1 >= after);
    return switching_;
}

// The postcopy's figures, and the time left: the missing pages at the push's rate since the switch.
void PostcopyPhase::report(MigrationStats& s) const {
    if (sender_ == nullptr) return;
    s.postcopy = sender_->stats();
    s.postcopy.switch_ms = s.downtime_ms;  // the switch is postcopy's whole downtime
    s.ram.remaining = sender_->remaining_pages() * memory::kPageSize;
    if (s.status != MigrationStatus::postcopy_active) return;
    double since_switch = std::chrono::duration<double>(SteadyClock::now() - switched_at_).count();
    double push = since_switch > 0 ? static_cast<double>(s.postcopy.postcopy_bytes) / since_switch : 0;
    s.eta = postcopy_eta(s.ram.remaining, push);
    s.eta_link_bytes_per_s = push;
}

// Runs of the pages the destination must drop and fetch again: dirty since they were sent.
Status PostcopyPhase::send_discards(stream::ByteStream& st, const SourceCore::Bitmaps& bitmaps) {
    std::vector<uint8_t> all;
    for (uint32_t b = 0; b < bitmaps.size(); ++b) {
        uint64_t pages = core_.machine.memory().blocks()[b]->pages();
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

Status PostcopyPhase::run(SourceRun& run) {
    DowntimeParts parts;
    auto paused_at = Clock::now();
    core_.machine.run().pause();
    core_.paused_by_us = true;
    auto bitmaps = core_.take_dirty();  // what changed since it was sent: the destination must not keep it
    if (!bitmaps) return bitmaps.error();
    if (run.saver.cut_short()) {  // ... and what the round stopped short of: the destination never had it
        const auto& unsent = run.saver.unsent();
        for (size_t b = 0; b < bitmaps->size() && b < unsent.size(); ++b)
            for (size_t w = 0; w < (*bitmaps)[b].size() && w < unsent[b].size(); ++w) (*bitmaps)[b][w] |= unsent[b][w];
    }
    auto discards_at = Clock::now();
    parts.pause = ms_between(paused_at, discards_at);
    if (auto s = send_discards(run.conn->stream(), *bitmaps); !s) return s;
    parts.last_round = ms_between(discards_at, Clock::now());  // postcopy's last round: what to drop
    auto state_bytes = switchover_.hand_over(run, parts, RecordType::postcopy);
    // A break while GO went (its write failed, yet it may have arrived: an RDMA send whose
    // acknowledgement was lost) leaves it in doubt whether the destination runs the guest. Then
    // as after GO: this side keeps its copy paused, and postcopy's recovery settles it.
    std::optional<Error> in_doubt;
    if (!state_bytes && switchover_.went_go() && !core_.cancel.cancelled()) {
        in_doubt = Error(fmt::format("the link broke as GO went ({}), so the destination may run the guest: if it does "
                                     "('info status' there), recover the postcopy; if it does not, 'cont -f' here runs it",
                                     state_bytes.error().message()));
        state_bytes = uint64_t{0};
    }
    if (!state_bytes) return state_bytes.error();
    core_.paused_by_us = false;  // GO went: the destination runs the guest, this side never again
    went_ = true;
    core_.machine.run().refuse_resume("the guest runs on the destination in postcopy, which still lacks pages only this side has: "
                           "running it here too would fork it ('cont -f' forces it)");
    core_.release_throttles();
    core_.machine.run().set_postmigrate();
    std::vector<BlockInfo> blocks = header_for(core_.machine).blocks;
    PostcopySender sender(core_.machine.memory(), run.conn->source_postcopy({blocks, core_.sums_on()}), blocks,
                          std::move(*bitmaps), core_.cancel, *core_.live, {core_.options.caps.zero_blocks});
    uint64_t precopy_bytes = run.work.transferred;
    {
        std::lock_guard lock(core_.mutex);
        core_.stats.downtime_ms = ms_since(paused_at);
        core_.stats.downtime_parts = parts;
        core_.stats.ram.precopy_bytes = precopy_bytes;
        core_.stats.ram.downtime_bytes = *state_bytes;
        core_.stats.cpu_throttle_percentage = 0;
        sender_ = &sender;
        switched_at_ = Clock::now();
    }
    core_.set_status(MigrationStatus::postcopy_active);
    Status s = in_doubt ? Status(*in_doubt) : sender.run();
    while (!s && !core_.cancel.cancelled()) {  // the link broke: both sides keep their state
        if (auto r = recover_link(sender, s.error()); !r) {
            s = r;  // given up: the guest was forced to run here
            break;
        }
        s = sender.run();
    }
    {
        std::lock_guard lock(core_.mutex);
        core_.stats.postcopy = sender.stats();
        core_.stats.postcopy.switch_ms = core_.stats.downtime_ms;
        core_.stats.ram.transferred = run.work.transferred + *state_bytes + core_.stats.postcopy.postcopy_bytes;
        core_.stats.ram.remaining = sender.remaining_pages() * memory::kPageSize;
        core_.stats.total_time_ms = ms_since(core_.start);
        sender_ = nullptr;
    }
    if (!s) return s;
    core_.machine.run().refuse_resume(kMovedAway);  // as after precopy: the guest has moved
    core_.set_status(MigrationStatus::completed);
    return {};
}

Status PostcopyPhase::recover_link(PostcopySender& sender, Error why) {
    sender.detach();  // nothing reads the dead link any more
    for (;;) {
        log::error("postcopy to {} broke: {}; both sides keep their state: 'migrate_recover URI' on the destination, then "
                   "'migrate -r URI' here resumes it",
                   core_.uri.text, why.message());
        core_.set_link_aside(why.message());
        core_.machine.run().refuse_resume(fmt::format("postcopy to {} is paused ({}): the destination runs the guest and this side "
                                           "holds pages it lacks; running the copy here would fork it ('cont -f' forces it)",
                                           core_.uri.text, why.message()));
        core_.set_status(MigrationStatus::postcopy_paused);
        auto to = await_resume();
        if (!to) return to.error();
        core_.set_status(MigrationStatus::postcopy_recover);
        auto s = reconnect(*to, sender);
        if (s) {
            std::lock_guard lock(core_.mutex);
            core_.stats.error.clear();
            break;
        }
        why = s.error();
    }
    core_.set_status(MigrationStatus::postcopy_active);
    return {};
}

Result<ResumeTo> PostcopyPhase::await_resume() {
    std::unique_lock lock(core_.mutex);
    for (;;) {
        if (core_.resume_to) {
            ResumeTo to = std::move(*core_.resume_to);
            core_.resume_to.reset();
            return to;
        }
        if (core_.cancel.cancelled()) return Error("migration cancelled");
        if (core_.machine.run().state() != machine::RunState::postmigrate) {
            return Error("the guest was resumed here with 'cont -f' while postcopy was paused: this copy and the "
                         "destination's have forked, and the postcopy cannot be recovered");
        }
        core_.resume_cv.wait_for(lock, std::chrono::milliseconds(200));
    }
}

// A new connection: the resuming header, the destination's answer, then which pages it holds.
Status PostcopyPhase::reconnect(const ResumeTo& to, PostcopySender& sender) {
    log::info("resuming postcopy over {}", to.uri.text);
    auto conn = to.transport->connect(context_for(core_.machine, to.uri, [o = core_.options] { return o; }, core_.cancel));
    if (!conn) return conn.error();
    stream::ByteStream& st = (*conn)->stream();
    StreamHeader header = header_for(core_.machine);
    header.features = kFeaturePostcopy | kFeaturePostcopyResume | (core_.sums_on() ? kFeatureVerifyRam : 0);
    if (auto s = st.write(encode_header(header)); !s) return s;
    if (auto s = st.flush(); !s) return s;
    if (auto w = st.await_readable(std::chrono::milliseconds(core_.options.params.connect_timeout_ms)); !w) {
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
        std::lock_guard lock(core_.mutex);
        core_.conn = std::move(*conn);
        core_.stats.uri = to.uri.text;
    }
    core_.uri = to.uri;
    sender.resume(core_.conn->source_postcopy({header.blocks, core_.sums_on()}), received.bits());
    log::info("postcopy resumed over {}", core_.conn->describe());
    return {};
}

}  // namespace vmm::migration
