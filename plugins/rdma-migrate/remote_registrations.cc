#include "remote_registrations.h"

#include <fmt/format.h>

#include <algorithm>

#include "trace.h"

namespace rdma_migrate {

namespace {
// `all` cut into runs of at most `n`.
template <typename T>
std::vector<std::vector<T>> runs_of(const std::vector<T>& all, size_t n) {
    std::vector<std::vector<T>> out;
    for (size_t at = 0; at < all.size(); at += n)
        out.emplace_back(all.begin() + static_cast<long>(at), all.begin() + static_cast<long>(std::min(all.size(), at + n)));
    return out;
}
}  // namespace

RemoteRegistrations::RemoteRegistrations(ControlChannel& ctl, const std::vector<BlockDesc>& remote,
                                         const std::vector<LocalBlock>& blocks, ChunkGeometry geo, size_t max_entries,
                                         uint64_t pin_limit, Hooks hooks)
    : ctl_(ctl), remote_(remote), blocks_(blocks), geo_(geo), max_entries_(max_entries), hooks_(std::move(hooks)),
      regs_(pin_limit),
      // Without kCapBatch a request names one chunk: the pipeline then asks one chunk ahead.
      ahead_(std::min<uint64_t>(max_entries, std::max<uint64_t>(1, kRegisterAheadBytes / geo.size()))) {}

Status RemoteRegistrations::ask(const std::vector<ChunkKey>& chunks, ControlChannel::Sent sent) {
    std::vector<RegisterEntry> entries;  // each names its chunk's start in the destination's offset space
    for (const auto& k : chunks) entries.push_back({remote_[k.block].offset + geo_.start(k.chunk), k.block, 0});
    return ctl_.exchange_send(encode_register_entries(Command::register_request, entries), sent);
}

// Reads the REGISTER RESULT for `chunks`, checks every entry, and keeps the rkeys.
Status RemoteRegistrations::take(const std::vector<ChunkKey>& chunks) {
    auto m = ctl_.answer(Command::register_result);
    if (!m) return m.error();
    auto results = decode_register_results(*m);
    if (!results) return results.error();
    if (results->size() != chunks.size()) return Error("the destination answered a register request with the wrong count");
    for (size_t i = 0; i < chunks.size(); ++i) {
        const auto& [block, chunk] = chunks[i];
        const RegisterResult& r = (*results)[i];
        if (auto s = check_register_result(r, remote_[block]); !s) return s;
        trace("source: remote chunk {}:{} registered, rkey {:#x} at {:#x}", block, chunk, r.rkey, r.host_addr);
        regs_.insert({block, chunk}, geo_.length(blocks_[block].size, chunk), r);
    }
    counts_.registered += chunks.size();
    return {};
}

Status RemoteRegistrations::queue(uint32_t block, const std::vector<Piece>& pieces) {
    ahead_.add(block, pieces, registered());
    if (auto s = take_arrived(); !s) return s;
    if (auto s = write_ready(); !s) return s;
    while (ahead_.ask_due(false))
        if (auto s = step(false); !s) return s;
    // Nothing asked and not answered: ask for what is queued now. A group fills in microseconds
    // when nothing holds the sender back, but in seconds under max-bandwidth, and the link would
    // idle meanwhile.
    if (asking_.empty() && ahead_.ask_due(true)) return step(true);
    return {};
}

// One step of the pipeline: read the answer for the group being registered, ask for the next
// group (its SEND goes ahead of the writes posted next), then write what is now registered.
Status RemoteRegistrations::step(bool final) {
    if (!asking_.empty()) {
        if (auto s = take(asking_); !s) return s;
        asking_.clear();
        if (auto s = hooks_.between_answers(); !s) return s;
    }
    if (ahead_.ask_due(final)) {
        asking_ = ahead_.take_ask();
        if (auto s = ask(asking_, ControlChannel::Sent::later); !s) return s;
    }
    return write_ready();
}

// The answer for the group being registered, if it has come: its writes go now. Without this
// they would wait for the next group to fill, which under max-bandwidth (or a dirty round of
// scattered pages) takes seconds, and the link would idle while they wait.
Status RemoteRegistrations::take_arrived() {
    if (asking_.empty()) return {};
    if (auto s = ctl_.reap(); !s) return s;
    if (!ctl_.has_message()) return {};
    if (auto s = take(asking_); !s) return s;
    asking_.clear();
    if (auto s = hooks_.between_answers(); !s) return s;
    return write_ready();
}

Status RemoteRegistrations::write_ready() {
    for (const auto& q : ahead_.take_ready(registered()))
        if (auto s = hooks_.write(q); !s) return s;
    return hooks_.written();
}

Status RemoteRegistrations::finish() {
    while (!asking_.empty() || ahead_.ask_due(true))
        if (auto s = step(true); !s) return s;
    if (auto s = write_ready(); !s) return s;
    if (!ahead_.empty()) return Error("internal: RDMA writes left queued without a registration");
    return {};
}

Status RemoteRegistrations::ensure(uint32_t block, const std::vector<uint64_t>& chunks) {
    std::vector<ChunkKey> missing;
    uint64_t bytes = 0;
    for (uint64_t c : chunks) {
        if (regs_.find({block, c}) != nullptr) continue;
        missing.push_back({block, c});
        bytes += geo_.length(blocks_[block].size, c);
    }
    if (missing.empty()) return {};
    auto victims = regs_.victims_for(bytes);
    if (!victims) return victims.error();
    if (auto s = release(*victims); !s) return s;
    for (const auto& run : runs_of(missing, max_entries_)) {
        if (auto s = ask(run, ControlChannel::Sent::wait); !s) return s;
        if (auto s = take(run); !s) return s;
    }
    return {};
}

// The destination may unpin only what no write in flight still targets: they drain first.
Status RemoteRegistrations::release(const std::vector<ChunkKey>& victims) {
    if (victims.empty()) return {};
    if (auto s = hooks_.drain_writes(); !s) return s;
    std::vector<RegisterEntry> entries;  // an unregister request names a chunk by its index
    for (const auto& k : victims) {
        entries.push_back({k.chunk, k.block, 0});
        trace("source: unregister remote chunk {}:{}", k.block, k.chunk);
    }
    for (const auto& run : runs_of(entries, max_entries_)) {
        auto done = ctl_.request(encode_register_entries(Command::unregister_request, run), Command::unregister_finished);
        if (!done) return done.error();
    }
    for (const auto& k : victims) regs_.erase(k);
    counts_.released += victims.size();
    return {};
}

}  // namespace rdma_migrate
