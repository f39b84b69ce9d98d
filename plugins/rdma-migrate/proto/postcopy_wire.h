// Postcopy over RDMA (ours, kCapPostcopy; docs/rdma-protocol.md, "Postcopy"): the wire of the
// postcopy channel, one more queue pair beside the lanes. After the switch the destination's
// guest runs while pages are missing; it asks for each with a SEND, and the source answers with
// one RDMA WRITE WITH IMMEDIATE into a landing slot the destination registered: one round trip.
// The source's background push uses the same writes into slots of their own, in a ring whose
// credit the destination returns. Nothing is ever written into guest RAM by the adapter: every
// page is placed from its slot by UFFDIO_COPY, atomically, and only after its address is checked.
//
// Destination → source: SEND messages of kPcMessageSize bytes (network order):
//   HELLO   {type, rkey, request slots, push slots, landing address u64, slot size u64}
//   REQUEST {type, slot, block, pages, offset u64, 0}     answer into request slot `slot`
//   CREDIT  {type, 0, 0, 0, 0, push slots consumed u64}   cumulative
//   DONE    {type, 0, ...}                                 every page is placed
//   HAVE    {type, 0, block, pages, offset u64, 0}         kCapPostcopyRead: pages this side
//                                                           read and placed; push none of them
// Source → destination: RDMA WRITE WITH IMMEDIATE into slot `slot` of the landing area; the
// immediate is {kind u8, slot u16, pages u8}. A data write carries `pages` pages and then the
// trailer; a zero write only the trailer (at the slot's start). END carries nothing.
//   trailer {block u32, pages u16, flags u16, offset u64} [+ pages u64 XXH3-64 sums if kPcSummed]
//           [+ u64 tag if kPcTagged: an authenticated channel's, proto/postcopy_auth.h]
// With kCapPostcopyRead the source also writes KEYS into push slots (the immediate's `pages` is
// how many regions): its RAM registered for remote read, region by region, each
//   region {block u32, rkey u32, offset u64, length u64, address u64}
//          [+ {tag rkey u32, 0 u32, tags u64} on an authenticated channel, and the KEYS write's
//           tag after the last region]
// and the destination reads a missing page straight from that address with an RDMA READ into
// one of its request slots, instead of asking: the source's CPU never hears of that fault.
// With kCapPostcopyReadPush the push writes no page of a region told: PULL writes (below) name
// those runs, and the destination reads them itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "vmm/common/result.h"
#include "wire.h"

namespace rdma_migrate {

using vmm::Error;
using vmm::Result;
using vmm::Status;

constexpr uint64_t kPcPage = 4096;
constexpr uint32_t kPcMaxPages = 16;  // pages one write carries (64 KiB: the push's run)
// A slot: up to kPcMaxPages pages, then the trailer, in one more page.
constexpr uint64_t kPcSlotSize = (kPcMaxPages + 1) * kPcPage;
constexpr uint32_t kPcMaxSlots = 256;  // request or push slots a destination may offer

enum class PcType : uint32_t { hello = 1, request = 2, credit = 3, done = 4, have = 5 };
constexpr uint32_t kPcMaxHave = 1u << 20;  // pages one HAVE names (4 GiB)
constexpr size_t kPcMessageSize = 32;

struct PcMessage {
    PcType type = PcType::done;
    // hello
    uint32_t rkey = 0, request_slots = 0, push_slots = 0;
    uint64_t landing = 0, slot_size = 0;
    // request
    uint32_t slot = 0, block = 0, pages = 0;
    uint64_t offset = 0;
    // credit
    uint64_t consumed = 0;
    bool operator==(const PcMessage&) const = default;
};

std::vector<uint8_t> encode_pc_message(const PcMessage& m);
// Checks the length, the type and every field the type uses (slots, sizes, pages); the
// request's block and range are the receiver's to check against its blocks.
Result<PcMessage> decode_pc_message(std::span<const uint8_t> bytes);

enum class PcKind : uint8_t { data = 1, zero = 2, end = 3, keys = 4, pull = 5 };
struct PcImmediate {
    PcKind kind = PcKind::end;
    uint16_t slot = 0;
    uint8_t pages = 0;
    bool operator==(const PcImmediate&) const = default;
};
// The immediate as a host-order value; the verbs layer converts to and from network order.
uint32_t encode_pc_immediate(const PcImmediate& imm);
Result<PcImmediate> decode_pc_immediate(uint32_t value, uint32_t slots);

constexpr uint16_t kPcSummed = 1;  // trailer flag: the pages' sums follow
constexpr uint16_t kPcTagged = 2;  // trailer flag: the write's tag ends it (authenticated channel)
constexpr size_t kPcTrailerSize = 16;
// The longest trailer: sums for kPcMaxPages pages and a tag.
constexpr size_t kPcMaxTrailerSize = kPcTrailerSize + kPcMaxPages * 8 + 8;
struct PcTrailer {
    uint32_t block = 0;
    uint16_t pages = 0;
    uint16_t flags = 0;
    uint64_t offset = 0;  // in the block
    std::vector<uint64_t> sums;  // with kPcSummed, one per page
    uint64_t tag = 0;            // with kPcTagged
    bool operator==(const PcTrailer&) const = default;
};
// The trailer's bytes; with kPcTagged the tag is left off (what the tag is computed over: the
// writer appends it, encode_pc_tag).
std::vector<uint8_t> encode_pc_trailer(const PcTrailer& t);
void encode_pc_tag(std::vector<uint8_t>& trailer, uint64_t tag);
// How many bytes of a decoded trailer come before its tag: what the tag covers of it.
inline size_t pc_trailer_untagged_size(const PcTrailer& t) { return kPcTrailerSize + t.sums.size() * 8; }
// `bytes`: what follows the data in the slot (up to the slot's end). Checks the flags and that
// the sums and the tag fit; block and range are the caller's to check.
Result<PcTrailer> decode_pc_trailer(std::span<const uint8_t> bytes);

struct LocalBlock;
// Whether `pages` pages from `offset` lie inside `blocks[block]` (a peer's word, checked).
Status check_pc_range(const std::vector<LocalBlock>& blocks, uint32_t block, uint64_t offset, uint64_t pages);

// kCapPostcopyRead: a range of the source's RAM the destination may read (KEYS). On an
// authenticated channel each region also names its page tags: a table of one u64 (network
// order) per page, registered for remote read too, read beside the pages (postcopy_auth.h).
struct PcRegion {
    uint32_t block = 0, rkey = 0;
    uint64_t offset = 0, length = 0;  // in the block: whole pages
    uint64_t address = 0;             // where the source has offset 0 of it
    uint32_t tag_rkey = 0;            // tagged: the table's rkey
    uint64_t tags = 0;                // tagged: where the table has the region's first page's tag
    bool operator==(const PcRegion&) const = default;
};
constexpr size_t kPcRegionSize = 32;
constexpr size_t kPcTaggedRegionSize = 48;  // + {tag rkey u32, 0 u32, tags u64}
constexpr size_t kPcTagSize = 8;
constexpr uint32_t kPcMaxRegions = 255;  // a KEYS write's (the immediate's count is a byte)
std::vector<uint8_t> encode_pc_regions(std::span<const PcRegion> regions, bool tagged = false);
// `bytes`: the slot's contents; `count`: the immediate's. Checks the count, each region's
// alignment, length and address (and its tag table's); block and range are the caller's to
// check (check_pc_range).
Result<std::vector<PcRegion>> decode_pc_regions(std::span<const uint8_t> bytes, uint32_t count, bool tagged = false);
// kCapPostcopyReadPush: PULL, into a push slot (the immediate's `pages` is how many runs):
//   {pull rate u64} then runs {block u32, pages u32, offset u64}
//   [+ the writes' tag on an authenticated channel]
// pages of regions a KEYS told that the source's push holds back: the destination reads them
// itself, at `rate` bytes a second (0: as fast as the link goes). A page a PULL names is one
// the source will not answer a request for (it took it for the push), as a pushed page.
struct PcPullRun {
    uint32_t block = 0, pages = 0;
    uint64_t offset = 0;
    bool operator==(const PcPullRun&) const = default;
};
struct PcPulls {
    uint64_t rate = 0;
    std::vector<PcPullRun> runs;
};
constexpr size_t kPcPullHeadSize = 8;
constexpr size_t kPcPullRunSize = 16;
constexpr uint32_t kPcMaxPullRuns = 255;        // the immediate's count is a byte
constexpr uint32_t kPcMaxPullPages = 1u << 20;  // pages one run names (4 GiB)
inline size_t pc_pulls_size(uint32_t runs) { return kPcPullHeadSize + runs * kPcPullRunSize; }
std::vector<uint8_t> encode_pc_pulls(const PcPulls& p);
// Each run: 1..kPcMaxPullPages pages from a page-aligned offset (the blocks are the caller's
// to check, check_pc_range); `count` runs from 1 to kPcMaxPullRuns, within the bytes.
Result<PcPulls> decode_pc_pulls(std::span<const uint8_t> bytes, uint32_t count);

// Where a write of `imm` puts its trailer in its slot.
inline uint64_t pc_trailer_offset(const PcImmediate& imm) { return imm.kind == PcKind::data ? imm.pages * kPcPage : 0; }

}  // namespace rdma_migrate
