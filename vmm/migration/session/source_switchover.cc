// MigrationSource's switchover as a commit (source.h; a resumable precopy's): GO, then the
// destination's RUNNING, then DONE. Before GO a broken link is a precopy's (the guest runs here
// again and the rounds go on: source_resume.cc). From GO until RUNNING this side cannot know
// whether the guest runs there: it keeps its copy paused and asks the destination on a new
// connection what it holds, RUNNING (the migration is over), READY (GO never arrived: it goes
// again), for as long as x-resume-window allows; past it, the guest stays paused here with a
// line saying how to tell which side to run.
#include <fmt/format.h>

#include "vmm/common/elapsed.h"
#include "vmm/common/log.h"
#include "vmm/migration/session/source.h"
#include "vmm/migration/session/source_run.h"
#include "vmm/migration/transport/stream_io.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

namespace {
using Clock = SteadyClock;
}  // namespace

void MigrationSource::cut_at(uint64_t step) {
    if (options_.params.switchover_cut != step || cut_done_) return;  // once a migration
    cut_done_ = true;
    std::lock_guard lock(mutex_);
    if (!conn_) return;
    log::warn("x-switchover-cut {}: cutting the link to {} here, as a failed network would", step, uri_.text);
    (void)conn_->cut();
}

Status MigrationSource::confirm_running(Run& run) {
    stream::ByteStream& st = run.conn->stream();
    auto reply = read_reply(st);
    if (!reply) {
        if (cancel_.cancelled() || !st.link_broke()) return reply.error().context("waiting for the destination to run the guest");
        return settle_in_doubt(run, reply.error());
    }
    if (reply->type == ReplyType::refused) {
        paused_by_us_ = true;  // it says the guest does not run there: it runs here again
        return Error("the destination could not run the guest: " + reply->reason);
    }
    if (reply->type != ReplyType::running) return Error("the destination answered GO out of turn");
    cut_at(4);
    // Best effort: a destination that misses it stops waiting for it at the window's end.
    if (st.write(encode_reply(ReplyType::done))) (void)st.flush();
    return {};
}

Status MigrationSource::settle_in_doubt(Run& run, Error why) {
    auto since = Clock::now();
    auto window = std::chrono::milliseconds(options_.params.resume_window_ms);
    machine_.refuse_resume(fmt::format("the link to {} broke after GO ({}): the destination may run the guest, and this "
                                       "side asks it first; 'cont -f' runs it here, which forks the guest if the "
                                       "destination runs it",
                                       uri_.text, why.message()));
    log::warn("the link to {} broke after GO ({}): the destination may run the guest already; this side keeps its copy "
              "paused and asks the destination for up to {} ms (x-resume-window)",
              uri_.text, why.message(), window.count());
    {
        std::lock_guard lock(mutex_);
        broke_because_ = why.message();
        stats_.error = fmt::format("the link broke after GO ({}); asking the destination whether it runs the guest",
                                   why.message());
        if (conn_) {
            (void)conn_->cut();
            broken_.push_back(std::move(conn_));
        }
    }
    set_status(MigrationStatus::precopy_paused);
    Error last = why;
    for (;;) {
        if (cancel_.cancelled() || Clock::now() - since >= window) {
            return Error(fmt::format("the link to {} broke after GO ({}), and the destination did not say within "
                                     "x-resume-window ({} ms) whether it runs the guest (last try: {}). This side keeps "
                                     "its copy paused: see whether the destination runs it ('info status' there); only "
                                     "if it does not, 'cont -f' here runs it",
                                     uri_.text, why.message(), window.count(), last.message()));
        }
        bool asked = false;
        ResumeTo to = next_way(asked);
        auto settled = ask_destination(to, run, last);
        if (!settled) return settled.error();
        if (*settled) break;
        std::unique_lock lock(mutex_);
        resume_cv_.wait_for(lock, kReconnectEvery);
    }
    std::lock_guard lock(mutex_);
    ++stats_.precopy_resumes;
    stats_.precopy_paused_ms += ms_between(since, Clock::now());
    stats_.error.clear();
    broken_.clear();
    return {};
}

// One try: what the destination holds after GO. RUNNING: over; READY: GO never arrived, so it
// goes again, and RUNNING must follow.
Result<bool> MigrationSource::ask_destination(const ResumeTo& to, Run& run, Error& last) {
    auto conn = open_resumption(to, last);
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
            if (auto s = st.write(encode_reply(was_running_ ? ReplyType::go : ReplyType::go_paused)); !s) return s;
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
    std::lock_guard lock(mutex_);
    conn_ = std::move(*conn);
    run.conn = conn_.get();
    return true;
}

}  // namespace vmm::migration
