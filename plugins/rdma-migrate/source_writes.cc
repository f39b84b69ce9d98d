// The source's writes of a range (spec: "Migration of VM's ram"; TODO 1 and 4: bounded
// pinning): each range is split by chunk; its pieces are registered at the destination
// (RemoteRegistrations), read from this side's RAM through a local registration, and written
// on their chunk's lane (LaneWriter). Zero ranges become COMPRESS.
#include <fmt/format.h>

#include "source_session.h"
#include "trace.h"

namespace rdma_migrate {

namespace {
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

Result<uint32_t> SourceSession::local_lkey(uint32_t block, uint64_t chunk) {
    const LocalBlock& b = cfg_.blocks[block];
    if (cfg_.pin_all) {  // registered whole during setup (pin_blocks)
        const ibv_mr* mr = link_.pinned().mr(block);
        if (mr == nullptr) return Error("internal: rdma-pin-all block was not registered at setup");
        return mr->lkey;
    }
    if (MemoryRegion* mr = local_regs_.find({block, chunk})) return (*mr)->lkey;
    uint64_t len = geo_.length(b.size, chunk);
    auto victims = local_regs_.victims_for(len);
    if (!victims) return victims.error();
    if (!victims->empty()) {
        if (auto s = lanes_.drain(); !s) return s.error();
        for (const auto& k : *victims) {
            trace("source: unregister local chunk {}:{}", k.block, k.chunk);
            local_regs_.erase(k);
        }
        work_.local_released += victims->size();
    }
    auto mr = link_.first().memory().register_memory(b.host + geo_.start(chunk), len, Use::chunk_read,
                                            fmt::format("chunk {} of '{}'", chunk, b.name));
    if (!mr) return mr.error();
    uint32_t lkey = (*mr)->lkey;
    local_regs_.insert({block, chunk}, len, std::move(*mr));
    ++work_.local_registered;
    return lkey;
}

Status SourceSession::ram_send(uint32_t block, uint64_t offset, uint64_t length) {
    if (auto s = check_range(cfg_.blocks, block, offset, length); !s) return s;
    auto sums = sums_.take(block, offset, length);
    if (!sums) return sums.error();
    lanes_.accept(length);
    auto pieces = split_by_chunk(geo_, offset, length);
    if (*sums) {
        uint64_t number = sums_.await_writes(std::move(**sums), pieces.size());
        for (Piece& p : pieces) p.sums = number;
    }
    if (!cfg_.pin_all && cfg_.pin_limit == 0) {  // registered a group ahead (register_ahead.h)
        if (auto s = remote_regs_.queue(block, pieces); !s) return s;
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
    if (auto s = lanes_.reap(); !s) return s;
    return remote_regs_.awaiting_answer() ? Status{} : flush_sums(false);
}

Status SourceSession::write_pieces(uint32_t block, const std::vector<Piece>& pieces) {
    if (!cfg_.pin_all) {
        std::vector<uint64_t> chunks;
        for (const auto& p : pieces) chunks.push_back(p.chunk);
        if (auto s = remote_regs_.ensure(block, chunks); !s) return s;
    }
    for (const auto& p : pieces)
        if (auto s = write_piece(block, p); !s) return s;
    return lanes_.post_short_batches();
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
    return lanes_.write(p.chunk, wr, sge, p.sums, {block, p.offset});
}

Status SourceSession::flush_compress() {
    if (compress_.empty()) return {};
    if (auto s = remote_regs_.finish(); !s) return s;  // its answer comes before the next READY
    auto s = ctl_.exchange_send(encode_compress(compress_));
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
    return compress_.size() == link_.max_entries() ? flush_compress() : Status{};
}

}  // namespace rdma_migrate
