// A saved guest (migrate file:PATH): the migration stream, with its RAM laid out page for page
// (QEMU's mapped-ram idea), so that a later round writes a dirtied page over its earlier copy and
// a zero page stays a hole. Offsets are from the start of the save (`offset=` in the URI), all
// multiples of the page size; integers little-endian (docs/migration-stream.md, "Saved to a file").
//
//   [0, 8192)         the file header below, written last: a save that did not finish has none
//   RAM area          each block's pages at the block's ram_offset; a zero page is a hole
//   sums area         per block one u64 a page: its slot (page_slot: 0 for a zero page; in an
//                     incremental save kSlotInBase for a page it leaves to its base)
//   stream area       the migration stream (stream_format.h) as the source wrote it: its header,
//                     the rounds' markers, the device state, END and GO; XXH3-64 in the header
//
// The header: magic, version (u32), then the body, and the XXH3-64 of bytes [0, 8184) in its
// last 8 bytes. Pure: bytes in, values out.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

constexpr std::array<uint8_t, 8> kFileMagic = {'V', 'M', 'M', 'S', 'A', 'V', 'E', 0x0a};
constexpr uint32_t kFileVersion = 1;
constexpr uint64_t kFileHeaderSize = 8192;  // 64 blocks of 64-byte names fit
constexpr uint64_t kMaxFileStream = 128u << 20;  // the device state (<= 64 MiB) and the rounds' markers
constexpr uint64_t kMaxFileBlock = 1ull << 46;   // 64 TiB: keeps every sum of offsets far from overflow
constexpr size_t kMaxBasePath = 1024;
// An incremental save's slot for a page it does not hold: the page is as its base has it.
constexpr uint64_t kSlotInBase = UINT64_MAX;

struct FileBlock {
    std::string name;
    uint64_t guest_addr = 0;
    uint64_t size = 0;
    uint64_t ram_offset = 0;   // where its pages are
    uint64_t sums_offset = 0;  // where its slots are (one u64 a page)
    bool operator==(const FileBlock&) const = default;
};

struct FileHeader {
    uint32_t page_size = kStreamPageSize;
    uint32_t vcpu_count = 0;
    std::vector<FileBlock> blocks;
    uint64_t stream_offset = 0;  // after the sums area
    uint64_t stream_length = 0;
    uint64_t stream_sum = 0;     // XXH3-64 of the stream area
    uint64_t save_id = 0;        // random, never 0: what an incremental save names its base by
    // An incremental save (file-base): the save it builds on, by id and by the path it had;
    // 0 and empty for a full save.
    uint64_t base_id = 0;
    std::string base_path;
    bool operator==(const FileHeader&) const = default;
};

// Where everything of a machine with these blocks goes: RAM blocks one after another from the
// first page after the header, then their slots, then the stream (length and sum not yet known).
FileHeader file_layout(const std::vector<BlockInfo>& blocks, uint32_t vcpu_count);
// The bytes a block's slots take.
constexpr uint64_t sums_bytes(uint64_t block_size) { return block_size / kStreamPageSize * 8; }
// Exactly kFileHeaderSize bytes; refused (one line) when the body does not fit.
Result<std::vector<uint8_t>> encode_file_header(const FileHeader& h);
// Checks magic, version, the header's sum, and that every area is whole pages inside the save
// and no two overlap. Says what is wrong in one line.
Result<FileHeader> decode_file_header(std::span<const uint8_t> bytes);
// Where the save ends (the end of its stream area): a file shorter than offset + this is truncated.
uint64_t file_end(const FileHeader& h);
// A page's slot: 0 for a zero page, else its XXH3-64 (a sum of 0 kept as 1, one of kSlotInBase
// as kSlotInBase - 1).
uint64_t page_slot(const uint8_t* page);

}  // namespace vmm::migration
