// The source's RDMA-WRITE lanes (spec: "Migration of VM's ram"; TODO 1 and 4: bounded
// pinning): each range is split by chunk, each piece written on lane chunk % N, batches posted
// with one doorbell, every 64th write (or every 8 MiB) signalled, and at most ~16 MiB on the
// wire per lane; a lane drains by re-posting its last write signalled.
#include <fmt/format.h>

#include "source_session.h"
#include "trace.h"

namespace rdma_migrate {

namespace {
constexpr uint64_t kSignalEvery = 64;  // spec: only the last of every 64 chunks is signalled
// ... or of fewer, once they carry this much: a completion is what lets `transferred` and
// verify-ram's sums move on, and 64 chunks of 1 MiB would leave them 64 MiB behind the wire.
constexpr uint64_t kSignalBytes = 8 << 20;
constexpr size_t kPostBatch = 16;      // WRs per ibv_post_send: one doorbell per batch
constexpr uint64_t kInFlight = 128;    // writes posted and not yet known complete (perftest's tx depth)
// ... and bytes: a control message (a registration, verify-ram's sums) queues behind every write
// posted before it (RC order), so this is how far behind the wire it can fall. 16 MiB is over a
// millisecond at 100 Gb/s, a thousand round trips; with a signal every 8 MiB, 8 MiB stay in flight.
constexpr uint64_t kInFlightBytes = 16 << 20;

Status check_range(const std::vector<LocalBlock>& blocks, uint32_t block, uint64_t offset, uint64_t length) {
    if (block >= blocks.size() || offset > blocks[block].size || length > blocks[block].size - offset) {
        return Error(fmt::format("RAM range {}:{:#x}+{:#x} is outside the RAM blocks", block, offset, length));
    }
    return {};
}
}  // namespace

uint64_t SourceSession::ram_chunks() const {
    uint64_t n = 0;
    for (const auto& b : cfg_.blocks) n += geo_.count(b.size);
    return n;
}

uint64_t SourceSession::ram_in_flight() const {
    uint64_t arrived = 0;
    for (const Lane& l : lanes_) arrived += l.ledger.delivered();
    return accepted_ - arrived;
}

void SourceSession::write_completed(Lane& lane, uint64_t index) {
    uint64_t before = lane.ledger.delivered();
    lane.ledger.completed(index);  // RC: every earlier write on this queue pair is done too
    writes_landed(lane);
    if (arrival_fn_ != nullptr && lane.ledger.delivered() != before) arrival_fn_(arrival_ctx_);
}

Status SourceSession::reap_writes() {
    for (Lane& lane : lanes_) {
        if (lane.ledger.done() >= lane.last_signalled) continue;  // nothing it could tell
        Status s = &lane == &lanes_[0] ? ctl_->reap() : lane.ep->reap(on_lane_completion(lane));
        if (!s) return s;
    }
    return {};
}

Status SourceSession::lane_progress(Lane& lane, const std::function<bool()>& done) {
    if (&lane == &lanes_[0]) return ctl_->progress(done);  // shares its CQ with the control channel
    return lane.ep->progress(on_lane_completion(lane), done);
}

std::function<Status(const ibv_wc&)> SourceSession::on_lane_completion(Lane& lane) {
    return [this, &lane](const ibv_wc& wc) {
        write_completed(lane, wr_index(wc.wr_id));
        return Status{};
    };
}

Status SourceSession::drain_writes() {
    for (Lane& lane : lanes_) {
        if (auto s = post_writes(lane); !s) return s;  // what is still batched
        if (lane.ledger.posted() > lane.last_signalled) {
            // Everything posted since the last signalled write completes before this one (RC
            // order): write the last write's first 8 bytes again, signalled (idempotent).
            ibv_sge sge = lane.last_sge;
            sge.length = std::min<uint32_t>(sge.length, 8);
            ibv_send_wr wr = lane.last_wr;
            wr.wr_id = make_wr_id(WrKind::write, lane.ledger.post(0));  // its bytes count with the write it repeats
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.next = nullptr;
            ibv_send_wr* bad = nullptr;
            if (auto s = posted(ibv_post_send(lane.ep->qp.get(), &wr, &bad), "ibv_post_send (drain)"); !s) return s;
            lane.last_signalled = lane.signalled_on_wire = lane.ledger.posted();
            lane.unsignalled_bytes = 0;
        }
    }
    for (Lane& lane : lanes_) {
        const WriteLedger& l = lane.ledger;
        trace("source: drain lane {}: {} posted, {} known done", &lane - lanes_.data(), l.posted(), l.done());
        if (auto s = wait_lane(lane, [&l] { return l.done() >= l.posted(); }); !s) return s;
    }
    return {};
}

// Waits on a lane's completions until `done`; verify-ram sums its completions make ready go to
// the destination meanwhile, so it checks while the writes drain rather than after them.
Status SourceSession::wait_lane(Lane& lane, const std::function<bool()>& done) {
    for (;;) {
        bool due = false;
        if (auto s = lane_progress(lane, [&] { return done() || (due = sums_due()); }); !s) return s;
        if (!due || done()) return {};
        if (auto s = flush_sums(false); !s) return s;
    }
}

Result<uint32_t> SourceSession::local_lkey(uint32_t block, uint64_t chunk) {
    const LocalBlock& b = cfg_.blocks[block];
    if (cfg_.pin_all) {  // registered whole during setup (pin_blocks)
        if (block >= pinned_blocks_.size()) return Error("internal: rdma-pin-all block was not registered at setup");
        return pinned_blocks_[block]->lkey;
    }
    if (MemoryRegion* mr = local_regs_.find({block, chunk})) return (*mr)->lkey;
    uint64_t len = geo_.length(b.size, chunk);
    auto victims = local_regs_.victims_for(len);
    if (!victims) return victims.error();
    if (!victims->empty()) {
        if (auto s = drain_writes(); !s) return s.error();
        for (const auto& k : *victims) {
            trace("source: unregister local chunk {}:{}", k.block, k.chunk);
            local_regs_.erase(k);
        }
        work_.local_released += victims->size();
    }
    auto mr = ep_->memory().register_memory(b.host + geo_.start(chunk), len, Use::chunk_read,
                                            fmt::format("chunk {} of '{}'", chunk, b.name));
    if (!mr) return mr.error();
    uint32_t lkey = (*mr)->lkey;
    local_regs_.insert({block, chunk}, len, std::move(*mr));
    ++work_.local_registered;
    return lkey;
}

Status SourceSession::post_writes(Lane& lane) {
    if (lane.wrs.empty()) return {};
    // Room in the send queue: wait for completions while too much is in flight. With a signal
    // every 64 writes and at most 128 + 16 in flight, a signalled write is always among them.
    // Bytes are counted on the wire (not this batch) and waited for only while a signalled write
    // is there to report them: a single write larger than the bound must not wait forever.
    const WriteLedger& l = lane.ledger;
    uint64_t batched = 0;
    for (const ibv_sge& sge : lane.sges) batched += sge.length;
    auto room = [&l, &lane, batched] {
        if (l.posted() - l.done() > kInFlight) return false;
        return l.in_flight() - batched <= kInFlightBytes || l.done() >= lane.signalled_on_wire;
    };
    if (auto s = wait_lane(lane, room); !s) return s;
    for (size_t i = 0; i < lane.wrs.size(); ++i) {
        lane.wrs[i].sg_list = &lane.sges[i];
        lane.wrs[i].next = i + 1 < lane.wrs.size() ? &lane.wrs[i + 1] : nullptr;
    }
    lane.last_wr = lane.wrs.back();
    lane.last_sge = lane.sges.back();
    ibv_send_wr* bad = nullptr;
    auto s = posted(ibv_post_send(lane.ep->qp.get(), lane.wrs.data(), &bad), "ibv_post_send (RDMA WRITE)");
    for (const ibv_send_wr& wr : lane.wrs)
        if (s && (wr.send_flags & IBV_SEND_SIGNALED) != 0) lane.signalled_on_wire = wr_index(wr.wr_id);
    lane.wrs.clear();
    lane.sges.clear();
    return s;
}

Status SourceSession::queue_write(Lane& lane, ibv_send_wr wr, ibv_sge sge, uint64_t sums) {
    uint64_t index = lane.ledger.post(sge.length);
    if (sums != 0) lane.tags.emplace_back(index, sums);  // its landing counts for those sums
    wr.wr_id = make_wr_id(WrKind::write, index);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.num_sge = 1;
    wr.send_flags = 0;
    lane.unsignalled_bytes += sge.length;
    if (lane.ledger.posted() - lane.last_signalled >= kSignalEvery || lane.unsignalled_bytes >= kSignalBytes) {
        wr.send_flags = IBV_SEND_SIGNALED;
        lane.last_signalled = lane.ledger.posted();
        lane.unsignalled_bytes = 0;
    }
    lane.wrs.push_back(wr);
    lane.sges.push_back(sge);
    return lane.wrs.size() == kPostBatch ? post_writes(lane) : Status{};
}

Status SourceSession::ram_send(uint32_t block, uint64_t offset, uint64_t length) {
    if (auto s = check_range(cfg_.blocks, block, offset, length); !s) return s;
    auto sums = sums_.take(block, offset, length);
    if (!sums) return sums.error();
    accepted_ += length;
    auto pieces = split_by_chunk(geo_, offset, length);
    if (*sums) {
        uint64_t number = sums_.await_writes(std::move(**sums), pieces.size());
        for (Piece& p : pieces) p.sums = number;
    }
    if (!cfg_.pin_all && cfg_.pin_limit == 0) {  // registered a group ahead (register_ahead.h)
        ahead_.add(block, pieces, registered_remotely());
        if (auto s = take_arrived_registration(); !s) return s;
        if (auto s = post_ready(); !s) return s;
        while (ahead_.ask_due(false))
            if (auto s = register_step(false); !s) return s;
        // Nothing asked and not answered: ask for what is queued now. A group fills in
        // microseconds when nothing holds the sender back, but in seconds under max-bandwidth,
        // and the link would idle meanwhile.
        if (asking_.empty() && ahead_.ask_due(true))
            if (auto s = register_step(true); !s) return s;
        return sent_pieces();
    }
    // Under rdma-pin-limit, register and write in groups that fit the limit at once.
    size_t group = cfg_.pin_all ? pieces.size() : std::max<size_t>(1, cfg_.pin_limit / geo_.size());
    for (size_t at = 0; at < pieces.size(); at += group) {
        std::vector<Piece> part(pieces.begin() + static_cast<long>(at),
                                pieces.begin() + static_cast<long>(std::min(pieces.size(), at + group)));
        if (auto s = write_pieces(block, part); !s) return s;
    }
    return sent_pieces();
}

// After ram_send: take the completions that have come, so that ram_in_flight() follows the
// wire, and send the sums they made ready (unless a registration answer is awaited).
Status SourceSession::sent_pieces() {
    if (auto s = reap_writes(); !s) return s;
    return asking_.empty() ? flush_sums(false) : Status{};
}

Status SourceSession::write_pieces(uint32_t block, const std::vector<Piece>& pieces) {
    if (!cfg_.pin_all) {
        std::vector<uint64_t> chunks;
        for (const auto& p : pieces) chunks.push_back(p.chunk);
        if (auto s = ensure_remote(block, chunks); !s) return s;
    }
    for (const auto& p : pieces)
        if (auto s = write_piece(block, p); !s) return s;
    return post_short_batches();
}

// Batches left short go to the HCA now rather than when the next ram_send fills them.
Status SourceSession::post_short_batches() {
    for (Lane& lane : lanes_)
        if (auto s = post_writes(lane); !s) return s;
    return {};
}

// One RDMA WRITE of a piece whose chunk the destination has registered (or pinned whole).
Status SourceSession::write_piece(uint32_t block, const Piece& p) {
    auto lkey = local_lkey(block, p.chunk);
    if (!lkey) return lkey.error();
    ibv_send_wr wr{};
    if (cfg_.pin_all) {
        wr.wr.rdma.remote_addr = remote_[block].host_addr + p.offset;
        wr.wr.rdma.rkey = remote_[block].rkey;
    } else {
        const RegisterResult* r = remote_regs_.find({block, p.chunk});
        if (r == nullptr) return Error("internal: a chunk lost its registration before its write");
        wr.wr.rdma.remote_addr = r->host_addr + p.offset;  // the block's start, as QEMU answers
        wr.wr.rdma.rkey = r->rkey;
    }
    ibv_sge sge{reinterpret_cast<uint64_t>(cfg_.blocks[block].host + p.offset), static_cast<uint32_t>(p.length), *lkey};
    trace("source: write {}:{:#x}+{:#x} (chunk {}) lane {} -> rkey {:#x} at {:#x}, lkey {:#x}", block, p.offset, p.length,
          p.chunk, p.chunk % lanes_.size(), wr.wr.rdma.rkey, wr.wr.rdma.remote_addr, *lkey);
    ++work_.pieces;
    return queue_write(lanes_[p.chunk % lanes_.size()], wr, sge, p.sums);
}

Status SourceSession::flush_compress() {
    if (compress_.empty()) return {};
    if (auto s = finish_ahead(); !s) return s;  // its answer comes before the next READY
    auto s = ctl_->exchange_send(encode_compress(compress_));
    compress_.clear();
    sums_.compress_sent();
    return s;
}

Status SourceSession::ram_send_zero(uint32_t block, uint64_t offset, uint64_t length) {
    if (auto s = check_range(cfg_.blocks, block, offset, length); !s) return s;
    if (block >= remote_.size()) return Error("internal: zero pages sent before the RAM blocks were exchanged");
    auto sums = sums_.take(block, offset, length);
    if (!sums) return sums.error();
    if (*sums) sums_.await_compress(std::move(**sums));
    compress_.push_back({0, block, remote_[block].offset + offset, length});  // in the destination's offset space
    return compress_.size() == max_entries_ ? flush_compress() : Status{};
}

}  // namespace rdma_migrate
