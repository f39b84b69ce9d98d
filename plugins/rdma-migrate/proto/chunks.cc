#include "chunks.h"

#include <fmt/format.h>

#include <bit>

namespace rdma_migrate {

namespace {
constexpr uint64_t kPage = 4096;

bool inside(uint64_t offset, uint64_t length, uint64_t block_len) {
    return offset <= block_len && length <= block_len - offset;
}
}  // namespace

Result<ChunkGeometry> ChunkGeometry::make(uint64_t chunk_size) {
    if (chunk_size < kMin || chunk_size > kMax || !std::has_single_bit(chunk_size)) {
        return Error(fmt::format("x-rdma-chunk-size {} must be a power of two from 1048576 (1M) to 1073741824 (1G)", chunk_size));
    }
    return ChunkGeometry(chunk_size, static_cast<unsigned>(std::countr_zero(chunk_size)));
}

uint64_t ChunkGeometry::length(uint64_t block_len, uint64_t chunk) const {
    uint64_t s = start(chunk);
    if (s >= block_len) return 0;
    return std::min(size_, block_len - s);
}

std::vector<Piece> split_by_chunk(const ChunkGeometry& g, uint64_t offset, uint64_t length) {
    std::vector<Piece> out;
    uint64_t end = offset + length;
    while (offset < end) {
        uint64_t chunk = g.index(offset);
        uint64_t stop = std::min(end, g.start(chunk + 1));
        out.push_back({chunk, offset, stop - offset});
        offset = stop;
    }
    return out;
}

void assign_offsets(std::vector<LocalBlock>& blocks) {
    uint64_t at = 0;
    for (auto& b : blocks) {
        b.offset = at;
        at += b.size;
    }
}

namespace {
Result<const LocalBlock*> named_block(uint32_t index, const std::vector<LocalBlock>& blocks, const char* what) {
    if (index >= blocks.size()) return Error(fmt::format("RDMA {} names RAM block {} (there are {})", what, index, blocks.size()));
    return &blocks[index];
}

ChunkSpan span(const ChunkGeometry& g, uint64_t block_len, uint64_t first, uint64_t count) {
    uint64_t offset = g.start(first);
    return {first, count, offset, std::min(block_len, g.start(first + count)) - offset};
}
}  // namespace

Result<ChunkSpan> check_register_entry(const RegisterEntry& r, const std::vector<LocalBlock>& blocks, const ChunkGeometry& g) {
    auto b = named_block(r.block, blocks, "REGISTER REQUEST");
    if (!b) return b.error();
    const LocalBlock& blk = **b;
    if (r.key < blk.offset || r.key - blk.offset >= blk.size) {
        return Error(fmt::format("RDMA REGISTER REQUEST address {:#x} is outside '{}' ({:#x}+{:#x})", r.key, blk.name,
                                 blk.offset, blk.size));
    }
    uint64_t first = g.index(r.key - blk.offset), chunks = g.count(blk.size);
    if (r.extra_chunks >= chunks - first) {
        return Error(fmt::format("RDMA REGISTER REQUEST names chunks {}+{} of '{}', which has {}", first, r.extra_chunks + 1,
                                 blk.name, chunks));
    }
    return span(g, blk.size, first, r.extra_chunks + 1);
}

Result<ChunkSpan> check_unregister_entry(const RegisterEntry& r, const std::vector<LocalBlock>& blocks, const ChunkGeometry& g) {
    auto b = named_block(r.block, blocks, "UNREGISTER REQUEST");
    if (!b) return b.error();
    const LocalBlock& blk = **b;
    if (r.key >= g.count(blk.size)) {
        return Error(fmt::format("RDMA UNREGISTER REQUEST names chunk {} of '{}', which has {}", r.key, blk.name,
                                 g.count(blk.size)));
    }
    return span(g, blk.size, r.key, 1);
}

Result<uint64_t> check_compress(const Compress& c, const std::vector<LocalBlock>& blocks) {
    auto b = named_block(c.block, blocks, "COMPRESS");
    if (!b) return b.error();
    const LocalBlock& blk = **b;
    uint64_t in_block = c.offset - blk.offset;  // checked below: wraps when c.offset < blk.offset
    if (c.offset < blk.offset || in_block % kPage != 0 || c.length % kPage != 0 || c.length == 0 ||
        !inside(in_block, c.length, blk.size)) {
        return Error(fmt::format("RDMA COMPRESS range {:#x}+{:#x} is not whole pages inside '{}' ({:#x}+{:#x})", c.offset,
                                 c.length, blk.name, blk.offset, blk.size));
    }
    return in_block;
}

Status check_block_lists(const std::vector<LocalBlock>& local, const std::vector<BlockDesc>& remote) {
    if (local.size() != remote.size()) {
        return Error(fmt::format("the peer has {} RAM blocks, this side {}: use the same RAM layout on both", remote.size(),
                                 local.size()));
    }
    for (size_t i = 0; i < local.size(); ++i) {
        if (local[i].size != remote[i].length) {
            return Error(fmt::format("RAM block {} ('{}') is {} bytes here but {} on the peer", i, local[i].name,
                                     local[i].size, remote[i].length));
        }
    }
    return {};
}

Status check_register_result(const RegisterResult& r, const BlockDesc& remote) {
    if (r.host_addr != remote.host_addr) {
        return Error(fmt::format("the destination registered a chunk of its block at {:#x} with the block at {:#x}, not at "
                                 "{:#x} as it announced",
                                 remote.offset, r.host_addr, remote.host_addr));
    }
    return {};
}

Status check_sums_entry(const SumsEntry& e, const std::vector<LocalBlock>& blocks) {
    if (e.block >= blocks.size() || e.offset % kPage != 0 || e.sums.empty() || e.sums.size() > blocks[e.block].size / kPage ||
        e.offset > blocks[e.block].size - e.sums.size() * kPage) {
        return Error(fmt::format("SUMS for {} pages at {}:{:#x} lie outside the RAM blocks", e.sums.size(), e.block, e.offset));
    }
    return {};
}

}  // namespace rdma_migrate
