// Postcopy's return path (issue 22): what the destination sends the source while the guest
// already runs on the destination and pulls the pages it still lacks. Pure: bytes in, values
// out, every block, range and count checked against the destination's own blocks before use
// (the decoder runs on the source, against the source's blocks, which the header made equal).
//
//   destination -> source
//     0xA0 PAGE_REQUEST     u32 block, u64 offset, u32 length   the guest faulted there: send it first
//     0xA1 RECEIVED_BITMAP  u32 block, u64 first page (a multiple of 64), u32 page count,
//                           then ceil(count / 64) u64 words, bit i = the destination holds page
//                           first + i: after a broken link, what the source must send again
//     0xA2 POSTCOPY_DONE    the destination holds every page: the source may end
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

enum class ReturnType : uint8_t { page_request = 0xA0, received_bitmap = 0xA1, postcopy_done = 0xA2 };

constexpr uint32_t kMaxRequestBytes = 2u << 20;    // one request: up to a 2 MiB huge page
constexpr uint32_t kMaxBitmapPages = 1u << 20;     // one RECEIVED_BITMAP: 4 GiB of RAM, 128 KiB of bits

struct ReturnMessage {
    ReturnType type = ReturnType::postcopy_done;
    uint32_t block = 0;
    uint64_t offset = 0;      // PAGE_REQUEST: bytes into the block
    uint32_t length = 0;      // PAGE_REQUEST: bytes
    uint64_t first_page = 0;  // RECEIVED_BITMAP
    uint32_t page_count = 0;  // RECEIVED_BITMAP: its words follow (bitmap_words)
};

std::vector<uint8_t> encode_page_request(uint32_t block, uint64_t offset, uint32_t length);
// `words` holds ceil(page_count / 64) words; bits past page_count must be clear.
std::vector<uint8_t> encode_received_bitmap(uint32_t block, uint64_t first_page, uint32_t page_count,
                                            std::span<const uint64_t> words);
std::vector<uint8_t> encode_postcopy_done();

// How many bytes of fields follow a message's type byte; an unknown type is refused.
Result<size_t> return_body_size(uint8_t type);
// The fields after the type byte, checked: block index, whole pages inside the block, the
// request's size limit, the bitmap's alignment, count limit and range.
Result<ReturnMessage> decode_return(uint8_t type, std::span<const uint8_t> body, const std::vector<BlockInfo>& blocks,
                                   uint32_t page_size);
// RECEIVED_BITMAP: the bytes of words that follow its fields.
inline size_t bitmap_bytes(const ReturnMessage& m) { return (size_t{m.page_count} + 63) / 64 * 8; }
// Those words; a set bit past page_count is refused (a peer that says more than it counted).
Result<std::vector<uint64_t>> decode_bitmap_words(const ReturnMessage& m, std::span<const uint8_t> bytes);

}  // namespace vmm::migration
