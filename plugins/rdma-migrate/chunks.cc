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
    if (chunk_size < kPage || chunk_size > (1ull << 30) || !std::has_single_bit(chunk_size)) {
        return Error(fmt::format("rdma-chunk-size {} must be a power of two from 4096 (4K) to 1073741824 (1G)", chunk_size));
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

Result<ByteRange> check_chunk_range(const ChunkRange& r, const std::vector<LocalBlock>& blocks, const ChunkGeometry& g) {
    if (r.block >= blocks.size()) return Error(fmt::format("RDMA request names RAM block {} (there are {})", r.block, blocks.size()));
    const LocalBlock& b = blocks[r.block];
    uint64_t chunks = g.count(b.length);
    if (r.count == 0 || r.first >= chunks || r.count > chunks - r.first) {
        return Error(fmt::format("RDMA request names chunks {}+{} of '{}', which has {}", r.first, r.count, b.name, chunks));
    }
    uint64_t offset = g.start(r.first);
    uint64_t end = std::min(b.length, g.start(r.first + r.count));
    return ByteRange{offset, end - offset};
}

Status check_compress(const Compress& c, const std::vector<LocalBlock>& blocks) {
    if (c.block >= blocks.size()) return Error(fmt::format("RDMA COMPRESS names RAM block {} (there are {})", c.block, blocks.size()));
    const LocalBlock& b = blocks[c.block];
    if (c.offset % kPage != 0 || c.length % kPage != 0 || c.length == 0 || !inside(c.offset, c.length, b.length)) {
        return Error(fmt::format("RDMA COMPRESS range {:#x}+{:#x} is not whole pages inside '{}'", c.offset, c.length, b.name));
    }
    return {};
}

Status check_block_lists(const std::vector<LocalBlock>& local, const std::vector<BlockDesc>& remote) {
    if (local.size() != remote.size()) {
        return Error(fmt::format("the peer has {} RAM blocks, this side {}: use the same RAM layout on both", remote.size(),
                                 local.size()));
    }
    for (size_t i = 0; i < local.size(); ++i) {
        const auto& l = local[i];
        const auto& r = remote[i];
        if (l.name != r.name || l.length != r.length || l.guest_addr != r.guest_addr) {
            return Error(fmt::format("RAM block {} is '{}' ({} bytes at {:#x}) here but '{}' ({} bytes at {:#x}) on the peer",
                                     i, l.name, l.length, l.guest_addr, r.name, r.length, r.guest_addr));
        }
    }
    return {};
}

Status check_register_result(const RegisterResult& r, const BlockDesc& remote, const ChunkGeometry& g, uint64_t chunk) {
    uint64_t start = g.start(chunk);
    if (start >= remote.length || r.host_addr != remote.host_addr + start) {
        return Error(fmt::format("the destination registered chunk {} of '{}' at {:#x}, not at {:#x} as announced", chunk,
                                 remote.name, r.host_addr, remote.host_addr + start));
    }
    return {};
}

}  // namespace rdma_migrate
