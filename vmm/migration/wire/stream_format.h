// The migration stream, byte by byte (docs/migration-stream.md). All integers little-endian.
// Pure: bytes in, values out. What reads them off a ByteStream is transport/stream_io.h.
//
//   source -> destination   HEADER, then records until END
//   destination -> source   HEADER_OK or REFUSED(reason) after the header; READY or
//                           REFUSED(reason) after END
//   source -> destination   GO (or GO_PAUSED), after which the destination runs the guest
//                           (or holds it paused, as the source had it)
// Postcopy (header bit kFeaturePostcopy): DISCARD records, STATE and POSTCOPY end precopy
// instead of END; after READY and GO the source sends the missing pages (PAGES/ZERO outside any
// round) and END, while the destination sends requests (return_path.h) and POSTCOPY_DONE.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace vmm::migration {

constexpr uint32_t kStreamPageSize = 4096;  // the only page size the stream carries
constexpr std::array<uint8_t, 8> kMagic = {'V', 'M', 'M', 'M', 'I', 'G', 'R', 0x0a};
// 2: HEADER_OK carries the destination's hand-over rehearsal; 3: the header's feature bits and
// PAGES_SUMMED (end-to-end RAM verification).
constexpr uint32_t kVersion = 3;
constexpr uint32_t kMaxHeaderBody = 64 * 1024;
constexpr uint32_t kMaxBlocks = 64;
constexpr uint32_t kMaxPagesRecord = 4u << 20;     // bytes of data in one PAGES record
constexpr uint32_t kMaxStateRecord = 64u << 20;    // bytes of device + vCPU state
constexpr uint32_t kMaxReason = 1024;

enum class RamMode : uint8_t { inline_pages = 0, transport_channel = 1 };

struct BlockInfo {
    std::string name;
    uint64_t guest_addr = 0;
    uint64_t size = 0;
    bool operator==(const BlockInfo&) const = default;
};

// Header feature bits.
constexpr uint32_t kFeatureVerifyRam = 1u << 0;  // every page record carries its XXH3-64 (PAGES_SUMMED)
// With verify-ram over a transport's RAM channel that does not checksum itself (a plugin's): the
// pages it wrote in a round are summed in SUMS records on the stream, after the channel's round.
constexpr uint32_t kFeatureRoundSums = 1u << 1;
// With verify-ram over a RAM channel that carries the sums itself, delivered as the pages land
// (the RDMA plugin's SUMS messages): no SUMS records; ROUND_CHECKED as with kFeatureRoundSums.
constexpr uint32_t kFeatureChannelSums = 1u << 2;
// postcopy-ram: the source may end precopy with DISCARD records and POSTCOPY instead of END;
// the guest then runs on the destination, which pulls the pages it lacks (return_path.h).
constexpr uint32_t kFeaturePostcopy = 1u << 3;
// This connection resumes a postcopy whose link broke (postcopy/recovery.h): no precopy, no
// state; after HEADER_OK the destination describes the pages it holds, then postcopy goes on.
constexpr uint32_t kFeaturePostcopyResume = 1u << 4;
// The source resumes this migration's precopy over a new connection when the link breaks
// (x-resume-window): a SESSION record (its id and window) follows the header, before HEADER_OK.
// With kFeaturePostcopy too, the precopy before the switch resumes so; after the switch a
// broken link is a postcopy's to recover (kFeaturePostcopyResume), never both on one header.
constexpr uint32_t kFeatureResumable = 1u << 5;
// This connection resumes the precopy of the session its SESSION record names: after HEADER_OK
// the destination tells the round in which each page last arrived (RECEIVED_ROUNDS,
// return_path.h), and the rounds go on. A SESSION with window 0 instead says the source has
// ended that migration: the destination stops waiting for it.
constexpr uint32_t kFeaturePrecopyResume = 1u << 6;
// A RAM channel's round (multifd's lanes, a plugin's) is answered ROUND_CHECKED once every page of
// it has landed at the destination, sums or not: the source's round ends when its pages are in
// guest RAM, not when they left, so what the lanes still carried never runs into the pause that
// follows (a switch to postcopy, the last round). Only on a channel to a destination that answers.
constexpr uint32_t kFeatureRoundLanded = 1u << 7;
constexpr uint32_t kKnownFeatures = kFeatureVerifyRam | kFeatureRoundSums | kFeatureChannelSums | kFeaturePostcopy |
                                    kFeaturePostcopyResume | kFeatureResumable | kFeaturePrecopyResume |
                                    kFeatureRoundLanded;
constexpr uint32_t kMaxSumsRecord = 1024;  // pages one SUMS record covers

struct StreamHeader {
    uint32_t page_size = 4096;
    uint32_t vcpu_count = 0;
    std::vector<BlockInfo> blocks;
    RamMode ram_mode = RamMode::inline_pages;
    uint32_t features = 0;
};

enum class RecordType : uint8_t {
    round_begin = 0x01,
    pages = 0x02,
    zero = 0x03,
    round_end = 0x04,
    state = 0x05,
    end = 0x06,
    populate = 0x07,  // advisory: PAGES for this range follow, in order (prepare the memory)
    pages_summed = 0x08,  // PAGES with the XXH3-64 of each of its pages (the verify-ram feature)
    sums = 0x09,          // the XXH3-64 of pages a RAM channel wrote this round (kFeatureRoundSums)
    discard = 0x0A,       // postcopy: the destination lacks this range (stale or never sent); it faults there
    postcopy = 0x0B,      // postcopy: the state is complete; run with the discarded pages missing
    session = 0x0C,       // after a resumable header: u64 id, u32 window (ms), u32 round (the source's last)
};

// GO_PAUSED: go, but the source's guest was paused when the migration began (as QEMU carries
// the run state): the destination takes over and leaves it paused.
// ROUND_CHECKED (kFeatureRoundSums, kFeatureChannelSums, kFeatureRoundLanded): the destination has
// landed (and checked the sums of) a channel round, so the source learns what landing and checking
// cost before it pauses the guest, not after.
// RUNNING and DONE (a resumable precopy's switchover, kFeatureResumable): after GO the destination
// says the guest runs there (or is held as GO_PAUSED asked), and the source that heard it says
// the migration is over; until then a broken link leaves each side knowing what the other may
// do, and a resumption settles it (docs/migration-stream.md, "The switchover is a commit").
enum class ReplyType : uint8_t {
    header_ok = 0x80,
    refused = 0x81,
    ready = 0x82,
    go = 0x83,
    go_paused = 0x84,
    round_checked = 0x85,
    running = 0x86,
    done = 0x87,
};

// The fixed part of a record; PAGES and STATE carry `length` bytes of data after it.
struct Record {
    RecordType type = RecordType::end;
    uint32_t block = 0;   // pages, zero
    uint64_t offset = 0;  // pages, zero: byte offset in the block
    uint64_t length = 0;  // pages, zero, state: bytes
    uint32_t round = 0;   // round_begin, round_end, session
    uint64_t session = 0;     // session: the migration's id
    uint32_t window_ms = 0;   // session: how long the source tries to resume a broken link (0: it ended)
};

// The header: magic (8 bytes), then version and body length (u32 each), then the body.
constexpr size_t kHeaderPrefix = 8;
std::vector<uint8_t> encode_header(const StreamHeader& h);
// Checks the magic; a foreign stream (QEMU's, named as such) is refused here: its sender
// cannot read an answer in ours. Says what is wrong in one line, as do all decoders below.
Status decode_magic(std::span<const uint8_t> magic);
// Version and body length (checked against kMaxHeaderBody): the body's length.
Result<uint32_t> decode_header_prefix(std::span<const uint8_t> prefix);
Result<StreamHeader> decode_header_body(std::span<const uint8_t> body);
// A whole header (magic, prefix, body), as one buffer: for tests and fuzzing.
Result<StreamHeader> decode_header(std::span<const uint8_t> bytes);

// The fixed part of `r`: a type byte and its fields (without PAGES/STATE data; a PAGES_SUMMED
// record's page sums follow it, one u64 per page, before its data: page_sums.h).
std::vector<uint8_t> encode_record(const Record& r);
// How many bytes of fields follow a record's type byte; unknown types are refused.
Result<size_t> record_body_size(uint8_t type);
// The fields after the type byte, checked against the destination's blocks: block index,
// page alignment, offset + length inside the block (no overflow), size limits.
Result<Record> decode_record(uint8_t type, std::span<const uint8_t> body, const std::vector<BlockInfo>& blocks,
                             uint32_t page_size);

// REFUSED carries `reason`; HEADER_OK carries `handover_us`: how long the destination took to
// save and load its own (not yet running) vCPU and device state, the fixed part of a downtime.
std::vector<uint8_t> encode_reply(ReplyType t, const std::string& reason = {});
std::vector<uint8_t> encode_header_ok(uint32_t handover_us);
struct Reply {
    ReplyType type = ReplyType::refused;
    std::string reason;
    uint32_t handover_us = 0;
};
// How many bytes of fields follow a reply's type byte (REFUSED: its reason's length, which
// then follows); unknown replies are refused.
Result<size_t> reply_body_size(uint8_t type);
// The reply and, for REFUSED, the length of the reason that follows (checked against kMaxReason).
struct ReplyHead {
    Reply reply;
    uint32_t reason_length = 0;
};
Result<ReplyHead> decode_reply(uint8_t type, std::span<const uint8_t> body);

// A range of whole pages inside block `block` (no overflow), or what is wrong with it: every
// range a peer names in a record or a request is checked by this before anything uses it.
Status check_page_range(uint32_t block, uint64_t offset, uint64_t length, const std::vector<BlockInfo>& blocks,
                        uint32_t page_size);

// Compares the source's header with the destination's machine; the message says what differs
// and what to do.
Status check_compatible(const StreamHeader& source, const StreamHeader& local);

}  // namespace vmm::migration
