// Switchover (source_switchover.h): the hand-over, and GO as a commit in a resumable precopy.
#include "vmm/migration/session/source_switchover.h"

#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/migration/precopy/machine_state.h"
#include "vmm/migration/transport/stream_io.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;
}  // namespace

Result<uint64_t> Switchover::hand_over(SourceRun& run, DowntimeParts& parts, RecordType last) {
    auto t = Clock::now();
    auto state = save_machine_state(core_.machine);
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
    // asking it (settle_in_doubt), never by running the guest here again.
    went_go_ = true;
    if (auto s = st.write(encode_reply(core_.was_running ? ReplyType::go : ReplyType::go_paused)); !s) return s.error();
    if (auto s = st.flush(); !s) return s.error();
    cut_at(3);
    parts.go = ms_between(ready, Clock::now());
    return state->size();
}

void Switchover::cut_at(uint64_t step) {
    if (core_.options.params.switchover_cut != step || cut_done_) return;  // once a migration
    cut_done_ = true;
    std::lock_guard lock(core_.mutex);
    if (!core_.conn) return;
    log::warn("x-switchover-cut {}: cutting the link to {} here, as a failed network would", step, core_.uri.text);
    (void)core_.conn->cut();
}

Status Switchover::confirm_running(SourceRun& run) {
    stream::ByteStream& st = run.conn->stream();
    auto reply = read_reply(st);
    if (!reply) {
        if (core_.cancel.cancelled() || !st.link_broke()) return reply.error().context("waiting for the destination to run the guest");
        return settle_in_doubt(run, reply.error());
    }
    if (reply->type == ReplyType::refused) {
        core_.paused_by_us = true;  // it says the guest does not run there: it runs here again
        return Error("the destination could not run the guest: " + reply->reason);
    }
    if (reply->type != ReplyType::running) return Error("the destination answered GO out of turn");
    cut_at(4);
    // Best effort: a destination that misses it stops waiting for it at the window's end.
    if (st.write(encode_reply(ReplyType::done))) (void)st.flush();
    return {};
}

Status Switchover::settle_in_doubt(SourceRun& run, Error why) {
    auto since = Clock::now();
    auto window = std::chrono::milliseconds(core_.options.params.resume_window_ms);
    core_.machine.run().refuse_resume(fmt::format("the link to {} broke after GO ({}): the destination may run the guest, and this "
                                       "side asks it first; 'cont -f' runs it here, which forks the guest if the "
                                       "destination runs it",
                                       core_.uri.text, why.message()));
    log::warn("the link to {} broke after GO ({}): the destination may run the guest already; this side keeps its copy "
              "paused and asks the destination for up to {} ms (x-resume-window)",
              core_.uri.text, why.message(), window.count());
    resumption_.broke(why.message());
    core_.set_link_aside(
        fmt::format("the link broke after GO ({}); asking the destination whether it runs the guest", why.message()));
    core_.set_status(MigrationStatus::precopy_paused);
    Error last = why;
    for (;;) {
        if (core_.cancel.cancelled() || Clock::now() - since >= window) {
            return Error(fmt::format("the link to {} broke after GO ({}), and the destination did not say within "
                                     "x-resume-window ({} ms) whether it runs the guest (last try: {}). This side keeps "
                                     "its copy paused: see whether the destination runs it ('info status' there); only "
                                     "if it does not, 'cont -f' here runs it",
                                     core_.uri.text, why.message(), window.count(), last.message()));
        }
        bool asked = false;
        ResumeTo to = core_.next_way(asked);
        auto settled = ask_destination(to, run, last);
        if (!settled) return settled.error();
        if (*settled) break;
        core_.wait_before_next_try();
    }
    core_.link_back(since);
    return {};
}

// One try: what the destination holds after GO. RUNNING: over; READY: GO never arrived, so it
// goes again, and RUNNING must follow.
Result<bool> Switchover::ask_destination(const ResumeTo& to, SourceRun& run, Error& last) {
    auto conn = resumption_.open(to, last);
    if (!conn) return conn.error().context("while this side's guest waits paused after GO");
    if (!*conn) return false;
    stream::ByteStream& st = (*conn)->stream();
    auto phase = read_reply(st);
    if (!phase) {
        last = phase.error();
        return false;
    }
    if (phase->type == ReplyType::ready) {
        log::info("the destination never had GO: it goes again over {}", (*conn)->describe());
        auto go = [&]() -> Status {
            if (auto s = st.write(encode_reply(core_.was_running ? ReplyType::go : ReplyType::go_paused)); !s) return s;
            if (auto s = st.flush(); !s) return s;
            auto r = read_reply(st);
            if (!r) return r.error();
            if (r->type != ReplyType::running) return Error("the destination answered GO out of turn");
            return {};
        }();
        if (!go) {
            last = go.error();
            return false;
        }
    } else if (phase->type != ReplyType::running) {
        return Error("the destination holds no device state after GO: it is not this migration's any more; this side "
                     "keeps its copy paused ('cont -f' runs it)");
    }
    if (st.write(encode_reply(ReplyType::done))) (void)st.flush();
    log::info("the destination runs the guest (told over {})", (*conn)->describe());
    run.saver.rebind(st, (*conn)->source_ram(), core_.verify_for(**conn));  // lets go of the broken connection's channel before it goes
    std::lock_guard lock(core_.mutex);
    core_.conn = std::move(*conn);
    run.conn = core_.conn.get();
    return true;
}

}  // namespace vmm::migration
