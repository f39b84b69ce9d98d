// Chunks (spec: "Migration of VM's ram"): RAM moves in chunks, 1 MiB by default, a power of two
// up to 1 GiB with x-rdma-chunk-size (QEMU 11.1's range). Registration works per chunk; writes never cross a chunk.
// Also: the bounds checks every peer-supplied range passes before it touches memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wire.h"

namespace rdma_migrate {

class ChunkGeometry {
public:
    static constexpr uint64_t kDefault = 1 << 20;
    static constexpr uint64_t kMin = 1 << 20, kMax = 1 << 30;
    static constexpr uint32_t kMinShift = 20, kMaxShift = 30;
    // A power of two from 1 MiB to 1 GiB.
    static Result<ChunkGeometry> make(uint64_t chunk_size);
    uint64_t size() const { return size_; }
    uint64_t index(uint64_t offset) const { return offset >> shift_; }
    uint64_t start(uint64_t chunk) const { return chunk << shift_; }
    uint64_t count(uint64_t block_len) const { return (block_len + size_ - 1) >> shift_; }
    // The last chunk of a block may be shorter.
    uint64_t length(uint64_t block_len, uint64_t chunk) const;

private:
    ChunkGeometry(uint64_t size, unsigned shift) : size_(size), shift_(shift) {}
    uint64_t size_;
    unsigned shift_;
};

// A piece of a range that lies in one chunk: one RDMA WRITE.
struct Piece {
    uint64_t chunk;
    uint64_t offset;  // in the block
    uint64_t length;
    uint64_t sums = 0;  // source, verify-ram: the sums sequence this write's landing counts for (0: none)
};
// Splits [offset, offset+length) at chunk boundaries (contiguous pages stay one piece per chunk).
std::vector<Piece> split_by_chunk(const ChunkGeometry& g, uint64_t offset, uint64_t length);

struct LocalBlock {
    std::string name;
    uint8_t* host = nullptr;
    uint64_t size = 0;
    uint64_t guest_addr = 0;
    // Where the block starts in this side's RAM offset space (QEMU's ram_addr_t): the blocks
    // one after another, in order. A destination announces its offsets; requests use them.
    uint64_t offset = 0;
};
// Lays `blocks` out one after another in the RAM offset space.
void assign_offsets(std::vector<LocalBlock>& blocks);

// The chunks a request names, checked to lie inside one of `blocks`.
struct ChunkSpan {
    uint64_t first = 0;   // chunk index in the block
    uint64_t count = 0;
    uint64_t offset = 0;  // bytes, in the block
    uint64_t length = 0;
};
// A REGISTER REQUEST entry: its address inside the block it names, the chunks after it too.
Result<ChunkSpan> check_register_entry(const RegisterEntry& r, const std::vector<LocalBlock>& blocks, const ChunkGeometry& g);
// An UNREGISTER REQUEST entry: a chunk of the block it names.
Result<ChunkSpan> check_unregister_entry(const RegisterEntry& r, const std::vector<LocalBlock>& blocks, const ChunkGeometry& g);
// A COMPRESS entry: block index, whole pages inside the block, no overflow. Returns the offset
// in the block.
Result<uint64_t> check_compress(const Compress& c, const std::vector<LocalBlock>& blocks);
// A SUMS entry: whole pages inside the block it names (offset in the block), no overflow.
Status check_sums_entry(const SumsEntry& e, const std::vector<LocalBlock>& blocks);
// The destination's RAM blocks must match this side's in count and lengths, in order (QEMU's
// check; the migration stream's header has compared names and guest addresses already).
Status check_block_lists(const std::vector<LocalBlock>& local, const std::vector<BlockDesc>& remote);
// A register result's address must be the start of the block the destination announced (so an
// RDMA WRITE can never aim outside it).
Status check_register_result(const RegisterResult& r, const BlockDesc& remote);

}  // namespace rdma_migrate
