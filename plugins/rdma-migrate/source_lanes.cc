#include "source_lanes.h"

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
}  // namespace

LaneWriter::LaneWriter(ControlChannel& ctl, Endpoint& first, Hooks hooks) : ctl_(ctl), hooks_(std::move(hooks)) {
    lanes_.emplace_back(&first);
    ctl_.on_other = [this](const ibv_wc& wc) {
        completed(lanes_[0], wr_index(wc.wr_id));
        return Status{};
    };
}

uint64_t LaneWriter::in_flight() const {
    uint64_t arrived = 0;
    for (const Lane& l : lanes_) arrived += l.ledger.delivered();
    return accepted_ - arrived;
}

void LaneWriter::completed(Lane& lane, uint64_t index) {
    uint64_t before = lane.ledger.delivered();
    lane.ledger.completed(index);  // RC: every earlier write on this queue pair is done too
    while (!lane.tags.empty() && lane.tags.front().first <= lane.ledger.done()) {
        hooks_.landed(lane.tags.front().second);
        lane.tags.pop_front();
    }
    while (!lane.landings.empty() && lane.landings.front().index <= lane.ledger.done()) {
        const auto& l = lane.landings.front();
        if (landed_fn_) landed_fn_(l.at.block, l.at.offset, l.length);
        lane.landings.pop_front();
    }
    if (arrival_fn_ != nullptr && lane.ledger.delivered() != before) arrival_fn_(arrival_ctx_);
}

Status LaneWriter::reap() {
    for (Lane& lane : lanes_) {
        if (lane.ledger.done() >= lane.last_signalled) continue;  // nothing it could tell
        Status s = &lane == &lanes_[0] ? ctl_.reap() : lane.ep->reap(on_completion(lane));
        if (!s) return s;
    }
    return {};
}

Status LaneWriter::progress(Lane& lane, const std::function<bool()>& done) {
    if (&lane == &lanes_[0]) return ctl_.progress(done);  // shares its CQ with the control channel
    return lane.ep->progress(on_completion(lane), done);
}

std::function<Status(const ibv_wc&)> LaneWriter::on_completion(Lane& lane) {
    return [this, &lane](const ibv_wc& wc) {
        completed(lane, wr_index(wc.wr_id));
        return Status{};
    };
}

Status LaneWriter::drain() {
    for (Lane& lane : lanes_) {
        if (auto s = post(lane); !s) return s;  // what is still batched
        if (auto s = post_drain(lane); !s) return s;
    }
    for (Lane& lane : lanes_) {
        const WriteLedger& l = lane.ledger;
        trace("source: drain lane {}: {} posted, {} known done", &lane - lanes_.data(), l.posted(), l.done());
        if (auto s = wait(lane, [&l] { return l.done() >= l.posted(); }); !s) return s;
    }
    return {};
}

// Everything posted since the last signalled write completes before this one (RC order): write
// the last write's first 8 bytes again, signalled (idempotent).
Status LaneWriter::post_drain(Lane& lane) {
    if (lane.ledger.posted() <= lane.last_signalled) return {};
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
    return {};
}

// verify-ram sums that completions make ready go to the destination meanwhile, so it checks
// while the writes drain rather than after them.
Status LaneWriter::wait(Lane& lane, const std::function<bool()>& done) {
    for (;;) {
        bool due = false;
        if (auto s = progress(lane, [&] { return done() || (due = hooks_.sums_due()); }); !s) return s;
        if (!due || done()) return {};
        if (auto s = hooks_.send_sums(); !s) return s;
    }
}

Status LaneWriter::post(Lane& lane) {
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
    if (auto s = wait(lane, room); !s) return s;
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

Status LaneWriter::write(uint64_t chunk, ibv_send_wr wr, ibv_sge sge, uint64_t sums, RamAt at) {
    Lane& lane = lanes_[chunk % lanes_.size()];
    uint64_t index = lane.ledger.post(sge.length);
    if (sums != 0) lane.tags.emplace_back(index, sums);  // its landing counts for those sums
    if (landed_fn_) lane.landings.push_back({index, at, sge.length});
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
    return lane.wrs.size() == kPostBatch ? post(lane) : Status{};
}

Status LaneWriter::post_short_batches() {
    for (Lane& lane : lanes_)
        if (auto s = post(lane); !s) return s;
    return {};
}

}  // namespace rdma_migrate
