// verify-ram's page sums over RDMA (kCapSums, beyond the spec and QEMU; docs/rdma-protocol.md).
// The source is given each range's sums before the range (ram_sums); a data range's sums wait
// until every RDMA WRITE of it is known complete (on an RC queue pair a completion vouches for
// every earlier write, so the data is in the destination's memory), a zero range's until its
// COMPRESS has gone. Ready sums travel in SUMS messages while the round runs, between
// registration requests, so the destination checks them as the round goes on; the rest follow
// at the round's end, before REGISTER FINISHED. The destination checks each entry's block and
// range and hands it to vmm (on_sums).
#include <fmt/format.h>

#include "source_session.h"
#include "trace.h"

namespace rdma_migrate {

namespace {
constexpr size_t kPageSize = 4096;
// Ready sums worth a message mid-round: 8 MiB of pages (a 16 KiB message), what one signalled
// write vouches for (session_ram.cc).
constexpr size_t kSumsFlushPages = 2048;
// A SUMS message is not waited for: writes posted after it queue behind it and the source goes
// on; the next control message waits for the destination's READY, which follows its arrival.
constexpr auto kSumsSent = ControlChannel::Sent::later;
}  // namespace

Status SourceSession::ram_sums(uint32_t block, uint64_t offset, std::span<const uint64_t> sums) {
    if ((agreed_ & kCapSums) == 0) return Error("internal: verify-ram sums on an RDMA connection that did not agree on them");
    SumsEntry e{block, offset, {sums.begin(), sums.end()}};
    if (auto s = check_sums_entry(e, cfg_.blocks); !s) return s.error().context("internal");
    if (next_sums_) return Error("internal: verify-ram sums given twice without the range they belong to");
    next_sums_ = std::move(e);
    return {};
}

// The sums given for the range ram_send or ram_send_zero is handing over, if any.
Result<std::optional<SumsEntry>> SourceSession::take_sums(uint32_t block, uint64_t offset, uint64_t length) {
    if (!next_sums_) return std::optional<SumsEntry>{};
    SumsEntry e = std::move(*next_sums_);
    next_sums_.reset();
    if (e.block != block || e.offset != offset || e.sums.size() * kPageSize != length) {
        return Error(fmt::format("internal: verify-ram sums for {}:{:#x} ({} pages) came before pages {}:{:#x}+{:#x}", e.block,
                                 e.offset, e.sums.size(), block, offset, length));
    }
    return std::optional<SumsEntry>(std::move(e));
}

// A data range's sums wait for the writes of its `pieces` (numbered `seq` from here on).
uint64_t SourceSession::await_writes(SumsEntry e, size_t pieces) {
    uint64_t seq = ++sums_seq_;
    pending_sums_.emplace(seq, PendingSums{pieces, std::move(e)});
    return seq;
}

void SourceSession::sums_ready(SumsEntry e) {
    ready_sum_count_ += e.sums.size();
    ready_sums_.push_back(std::move(e));
}

// Called as a lane's ledger learns of completions: every write up to done() has landed.
void SourceSession::writes_landed(Lane& lane) {
    while (!lane.tags.empty() && lane.tags.front().first <= lane.ledger.done()) {
        auto it = pending_sums_.find(lane.tags.front().second);
        lane.tags.pop_front();
        if (it == pending_sums_.end() || --it->second.pieces > 0) continue;
        sums_ready(std::move(it->second.entry));
        pending_sums_.erase(it);
    }
}

bool SourceSession::sums_due() const { return asking_.empty() && ready_sum_count_ >= kSumsFlushPages; }

// Sends what is ready: mid-round (`all` false) only once it is worth a message, at the round's
// end everything (the writes drained, the COMPRESS messages sent). Never while a registration
// request waits for its answer: the destination answers that before it reads anything else.
Status SourceSession::flush_sums(bool all) {
    if (ready_sums_.empty() || (!all && ready_sum_count_ < kSumsFlushPages)) return {};
    // Taken out first: a send drives the completion queue, which may make more sums ready
    // meanwhile (they go with the next flush).
    std::vector<SumsEntry> ready = std::move(ready_sums_);
    ready_sums_.clear();
    ready_sum_count_ = 0;
    std::vector<SumsEntry> batch;
    size_t in_batch = 0;
    for (SumsEntry& e : ready) {
        for (size_t at = 0; at < e.sums.size();) {  // an entry larger than a message is split
            size_t n = std::min(e.sums.size() - at, kMaxSumsPerMessage - in_batch);
            batch.push_back({e.block, e.offset + at * kPageSize, {e.sums.begin() + static_cast<long>(at),
                                                                  e.sums.begin() + static_cast<long>(at + n)}});
            in_batch += n;
            at += n;
            if (in_batch == kMaxSumsPerMessage || batch.size() == kMaxRepeat) {
                if (auto s = ctl_->exchange_send(encode_sums(batch), kSumsSent); !s) return s;
                batch.clear();
                in_batch = 0;
            }
        }
    }
    if (batch.empty()) return {};
    trace("source: SUMS for {} ranges", batch.size());
    return ctl_->exchange_send(encode_sums(batch), kSumsSent);
}

// At the round's end, after its writes drained: every sum is ready and goes now.
Status SourceSession::finish_sums() {
    if (!pending_sums_.empty() || next_sums_) {
        return Error(fmt::format("internal: {} ranges' verify-ram sums still wait for their writes at the round's end",
                                 pending_sums_.size() + (next_sums_ ? 1 : 0)));
    }
    return flush_sums(true);
}

}  // namespace rdma_migrate
