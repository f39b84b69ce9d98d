// The source's dynamic registration (spec: "Migration of VM's ram", Register request/result;
// TODO 1 and 4: bounded pinning). Two ways to ask the destination for rkeys:
//   - a group ahead of the writes (RegisterAhead), the default: the destination pins the next
//     group while this one's writes are on the wire;
//   - just before the writes (ensure_remote), under rdma-pin-limit, where a chunk may have to
//     be unregistered first and only what no write in flight targets may be.
#include <fmt/format.h>

#include "source_session.h"
#include "trace.h"

namespace rdma_migrate {

Status SourceSession::ask_registration(const std::vector<ChunkKey>& chunks, ControlChannel::Sent sent) {
    std::vector<RegisterEntry> ask;  // each names its chunk's start in the destination's offset space
    for (const auto& k : chunks) ask.push_back({remote_[k.block].offset + geo_.start(k.chunk), k.block, 0});
    return ctl_->exchange_send(encode_register_entries(Command::register_request, ask), sent);
}

// Reads the REGISTER RESULT for `chunks`, checks every entry, and caches the rkeys.
Status SourceSession::take_registration(const std::vector<ChunkKey>& chunks) {
    auto m = ctl_->answer(Command::register_result);
    if (!m) return m.error();
    auto results = decode_register_results(*m);
    if (!results) return results.error();
    if (results->size() != chunks.size()) return Error("the destination answered a register request with the wrong count");
    for (size_t i = 0; i < chunks.size(); ++i) {
        const auto& [block, chunk] = chunks[i];
        const RegisterResult& r = (*results)[i];
        if (auto s = check_register_result(r, remote_[block]); !s) return s;
        trace("source: remote chunk {}:{} registered, rkey {:#x} at {:#x}", block, chunk, r.rkey, r.host_addr);
        remote_regs_.insert({block, chunk}, geo_.length(cfg_.blocks[block].size, chunk), r);
    }
    work_.remote_registered += chunks.size();
    return {};
}

// One step of the pipeline: read the answer for the group being registered, ask for the next
// group (its SEND goes ahead of the writes posted next), then write what is now registered.
Status SourceSession::register_step(bool final) {
    if (!asking_.empty()) {
        if (auto s = take_registration(asking_); !s) return s;
        asking_.clear();
        if (auto s = flush_sums(false); !s) return s;  // between an answer and the next request
    }
    if (ahead_.ask_due(final)) {
        asking_ = ahead_.take_ask();
        if (auto s = ask_registration(asking_, ControlChannel::Sent::later); !s) return s;
    }
    return post_ready();
}

// The answer for the group being registered, if it has come: its writes go now. Without this
// they would wait for the next group to fill, which under max-bandwidth (or a dirty round of
// scattered pages) takes seconds, and the link would idle while they wait.
Status SourceSession::take_arrived_registration() {
    if (asking_.empty()) return {};
    if (auto s = ctl_->reap(); !s) return s;
    if (!ctl_->has_message()) return {};
    if (auto s = take_registration(asking_); !s) return s;
    asking_.clear();
    if (auto s = flush_sums(false); !s) return s;
    return post_ready();
}

Status SourceSession::post_ready() {
    auto ready = ahead_.take_ready(registered_remotely());
    for (const auto& q : ready)
        if (auto s = write_piece(q.block, q.piece); !s) return s;
    return post_short_batches();
}

// Before any other control message, and at the end of a round: everything asked is answered
// and everything queued is written (posted).
Status SourceSession::finish_ahead() {
    while (!asking_.empty() || ahead_.ask_due(true))
        if (auto s = register_step(true); !s) return s;
    if (auto s = post_ready(); !s) return s;
    if (!ahead_.empty()) return Error("internal: RDMA writes left queued without a registration");
    return {};
}

Status SourceSession::ensure_remote(uint32_t block, const std::vector<uint64_t>& chunks) {
    std::vector<ChunkKey> missing;
    uint64_t bytes = 0;
    for (uint64_t c : chunks) {
        if (remote_regs_.find({block, c}) != nullptr) continue;
        missing.push_back({block, c});
        bytes += geo_.length(cfg_.blocks[block].size, c);
    }
    if (missing.empty()) return {};
    auto victims = remote_regs_.victims_for(bytes);
    if (!victims) return victims.error();
    if (!victims->empty()) {
        // The destination may unpin only what no write in flight still targets.
        if (auto s = drain_writes(); !s) return s;
        std::vector<RegisterEntry> release;  // an unregister request names a chunk by its index
        for (const auto& k : *victims) {
            release.push_back({k.chunk, k.block, 0});
            trace("source: unregister remote chunk {}:{}", k.block, k.chunk);
        }
        for (size_t at = 0; at < release.size(); at += max_entries_) {
            std::vector<RegisterEntry> part(release.begin() + static_cast<long>(at),
                                            release.begin() + static_cast<long>(std::min(release.size(), at + max_entries_)));
            auto done = ctl_->request(encode_register_entries(Command::unregister_request, part), Command::unregister_finished);
            if (!done) return done.error();
        }
        for (const auto& k : *victims) remote_regs_.erase(k);
        work_.remote_released += victims->size();
    }
    for (size_t at = 0; at < missing.size(); at += max_entries_) {
        std::vector<ChunkKey> ask(missing.begin() + static_cast<long>(at),
                                  missing.begin() + static_cast<long>(std::min(missing.size(), at + max_entries_)));
        if (auto s = ask_registration(ask, ControlChannel::Sent::wait); !s) return s;
        if (auto s = take_registration(ask); !s) return s;
    }
    return {};
}

}  // namespace rdma_migrate
