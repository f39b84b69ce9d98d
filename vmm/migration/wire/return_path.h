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
//     0xA3 RECEIVED_ROUNDS  u32 block, u64 first page, u32 page count, then count u32: the
//                           precopy round in which each page last arrived whole (kNeverArrived:
//                           none), after a broken precopy link: what the source sends again
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

enum class ReturnType : uint8_t { page_request = 0xA0, received_bitmap = 0xA1, postcopy_done = 0xA2, received_rounds = 0xA3 };

constexpr uint32_t kMaxRequestBytes = 2u << 20;    // one request: up to a 2 MiB huge page
constexpr uint32_t kMaxBitmapPages = 1u << 20;     // one RECEIVED_BITMAP: 4 GiB of RAM, 128 KiB of bits
constexpr uint32_t kMaxRoundsPages = 1u << 16;     // one RECEIVED_ROUNDS: 256 MiB of RAM, 256 KiB of rounds
constexpr uint32_t kNeverArrived = UINT32_MAX;     // RECEIVED_ROUNDS: the page never arrived whole

struct ReturnMessage {
    ReturnType type = ReturnType::postcopy_done;
    uint32_t block = 0;
    uint64_t offset = 0;      // PAGE_REQUEST: bytes into the block
    uint32_t length = 0;      // PAGE_REQUEST: bytes
    uint64_t first_page = 0;  // RECEIVED_BITMAP, RECEIVED_ROUNDS
    uint32_t page_count = 0;  // RECEIVED_BITMAP: its words follow (bitmap_words); RECEIVED_ROUNDS: its rounds
};

std::vector<uint8_t> encode_page_request(uint32_t block, uint64_t offset, uint32_t length);
// `words` holds ceil(page_count / 64) words; bits past page_count must be clear.
std::vector<uint8_t> encode_received_bitmap(uint32_t block, uint64_t first_page, uint32_t page_count,
                                            std::span<const uint64_t> words);
std::vector<uint8_t> encode_postcopy_done();
// One round per page, `rounds.size()` pages from `first_page` (at most kMaxRoundsPages).
std::vector<uint8_t> encode_received_rounds(uint32_t block, uint64_t first_page, std::span<const uint32_t> rounds);

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
// RECEIVED_ROUNDS: the bytes of rounds that follow its fields, and those rounds (each a round
// or kNeverArrived; whether a round could have been sent is the reader's to check).
inline size_t rounds_bytes(const ReturnMessage& m) { return size_t{m.page_count} * 4; }
Result<std::vector<uint32_t>> decode_rounds(const ReturnMessage& m, std::span<const uint8_t> bytes);

}  // namespace vmm::migration
