// The RDMA migration protocol's wire formats (spec: shared seeds 001, "RDMA Protocol
// Description" and "Versioning and Capabilities"; ours: docs/rdma-protocol.md). Every integer
// is in network byte order. Encoders return new bytes; decoders check every length, count and
// value before returning, and never byte-swap a struct in place.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"

namespace rdma_migrate {

using vmm::Error;
using vmm::Result;
using vmm::Status;

constexpr uint32_t kProtocolVersion = 1;
constexpr uint32_t kMaxRepeat = 4096;            // spec: "hard-coded to 4096"
constexpr size_t kControlBufferSize = 512 * 1024;  // each posted SEND/RECV buffer (QEMU's too)

// Private data exchanged by RDMA-CM at connect/accept. The base protocol (QEMU's
// RDMACapabilities) is 8 bytes: {version, flags}, flags bit 0 = pin-all. Our extensions are
// further flag bits, which QEMU does not know and so never grants (it answers `flags & what it
// knows`), and, when any of them is set, a 24-byte extension block after those 8 bytes, which a
// base-protocol peer never reads. RDMA-CM pads private data with zeros (to 56 bytes on a connect,
// 196 on an accept), so what follows the 8 bytes means something only when a flag says so.
constexpr uint32_t kCapPinAll = 1u << 0;     // the spec's one capability (QEMU's value)
constexpr uint32_t kCapChannels = 1u << 1;   // ours: this connection is one of N queue pairs
constexpr uint32_t kCapChunkSize = 1u << 2;  // ours: chunks of 2^chunk_shift bytes, not 1 MiB
constexpr uint32_t kCapBatch = 1u << 3;      // ours: REGISTER/UNREGISTER/COMPRESS with many entries
constexpr uint32_t kCapErrorText = 1u << 4;  // ours: ERROR carries a one-line reason
constexpr uint32_t kCapSums = 1u << 5;       // ours: SUMS messages carry verify-ram's page sums
constexpr uint32_t kCapPostcopy = 1u << 6;   // ours: a postcopy channel (postcopy_wire.h)
// ours: authenticated (tls-creds at both ends): a TLS 1.3 handshake in TLS messages before
// anything else, every later control message inside that session, RAM sums keyed from it
// (docs/rdma-protocol.md, "Authenticated migrations"). A destination with tls-creds refuses a
// source that does not offer it; a source with tls-creds, a destination that does not grant it.
constexpr uint32_t kCapTls = 1u << 7;
// ours, with kCapPostcopy (x-rdma-postcopy-read at both ends): the destination reads missing
// pages from the source's RAM with RDMA READ (postcopy_wire.h, KEYS).
constexpr uint32_t kCapPostcopyRead = 1u << 8;
// ours: not a migration but a clone pulling a served saved guest (pull_wire.h): only a pull
// server grants it, and it refuses every request without it.
constexpr uint32_t kCapPull = 1u << 9;
// ours, with kCapPostcopyRead (x-rdma-postcopy-read-push at the source): the destination also
// reads the background push itself: the source names the runs of regions told that its push
// holds back in PULL writes (postcopy_wire.h), with the pace to read them at, and writes none
// of those pages (docs/rdma-protocol.md, "The push by READ too").
constexpr uint32_t kCapPostcopyReadPush = 1u << 10;
constexpr uint32_t kExtensionCaps = kCapChannels | kCapChunkSize | kCapBatch | kCapErrorText | kCapSums | kCapPostcopy |
                                    kCapTls | kCapPostcopyRead | kCapPull | kCapPostcopyReadPush;
constexpr uint32_t kBaseChunkShift = 20;     // QEMU's RDMA_REG_CHUNK_SHIFT: 1 MiB

struct PrivateData {
    uint32_t version = kProtocolVersion;
    uint32_t flags = 0;
    // The extension block (present when flags has any extension bit):
    uint32_t channel = 0;        // kCapChannels: index of this connection, < channels
    uint32_t channels = 1;       // kCapChannels: how many connections the migration uses
    uint64_t session = 0;        // kCapChannels: ties the channels of one migration together
    uint32_t chunk_shift = kBaseChunkShift;  // kCapChunkSize: log2 of the source's chunk size
    bool operator==(const PrivateData&) const = default;
};
constexpr size_t kBasePrivateDataSize = 8;
constexpr size_t kPrivateDataSize = 32;  // with the extension block
constexpr size_t kPrivateDataMax = 56;   // RDMA-CM's limit for RC connect private data

// 8 bytes without extension bits, 32 with; fields of extensions not flagged are sent as zero.
std::vector<uint8_t> encode_private_data(const PrivateData& p);
// Reads the extension block only when a flag announces it (whatever the padding); fields of an
// extension that is not flagged take their base values. Another version → a clear error.
Result<PrivateData> decode_private_data(std::span<const uint8_t> bytes);

// Control-channel command types: QEMU's values, which the spec lists 1-based.
enum class Command : uint32_t {
    none = 0,
    error = 1,
    ready = 2,
    qemu_file = 3,
    ram_blocks_request = 4,
    ram_blocks_result = 5,
    compress = 6,
    register_request = 7,
    register_result = 8,
    register_finished = 9,
    unregister_request = 10,
    unregister_finished = 11,
    // Ours, only when kCapSums was agreed (QEMU's commands end at 11; ours start at 64).
    sums = 64,
    // Ours, only when kCapTls was agreed: TLS records (any number, or a piece of one: the
    // messages' data, in order, is the TLS session's byte stream). 1 or more bytes.
    tls = 65,
};
const char* to_string(Command c);

// QEMU's RDMAControlHeader: length, type, repeat, and a padding word (the spec lists only the
// first three). QEMU leaves repeat (on QEMU FILE) and padding uninitialised: neither is read
// where QEMU does not set it.
constexpr size_t kHeaderSize = 16;

struct Header {
    uint32_t length = 0;  // of the data portion
    Command type = Command::none;
    uint32_t repeat = 1;  // entries of REGISTER REQUEST, UNREGISTER REQUEST, COMPRESS
};

// One RAM block as the destination describes it (QEMU's RDMADestBlock, 32 bytes). The spec
// leaves the layout open; QEMU sends no name: the migration stream names the blocks, and both
// sides list them in the same order.
struct BlockDesc {
    uint64_t host_addr = 0;    // the destination's virtual address of the block
    uint64_t offset = 0;       // where the block starts in the destination's RAM offset space
                               // (QEMU's ram_addr_t): requests name addresses in that space
    uint64_t length = 0;
    uint32_t rkey = 0;         // pin-all: the whole block's rkey; else 0
    bool operator==(const BlockDesc&) const = default;
};
constexpr size_t kBlockDescSize = 32;

// REGISTER REQUEST / UNREGISTER REQUEST entry (QEMU's RDMARegister, 24 bytes): u64 key,
// u32 block, u32 padding, u64 chunks. For a register request the key is an address in the
// destination's RAM offset space inside block `block` and the destination registers that
// address's chunk and `extra_chunks` more after it; for an unregister request the key is a chunk
// index in the block (QEMU reads it so; it never sends one unless built with
// RDMA_UNREGISTRATION_EXAMPLE).
struct RegisterEntry {
    uint64_t key = 0;
    uint32_t block = 0;
    uint64_t extra_chunks = 0;
    bool operator==(const RegisterEntry&) const = default;
};
constexpr size_t kRegisterEntrySize = 24;

// Register result entry (QEMU's RDMARegisterResult, 16 bytes): the rkey of the registered
// chunks and the host address of the start of their *block* (QEMU's value; the source adds
// the offset in the block).
struct RegisterResult {
    uint32_t rkey = 0;
    uint64_t host_addr = 0;
    bool operator==(const RegisterResult&) const = default;
};
constexpr size_t kRegisterResultSize = 16;

// Compress entry (QEMU's RDMACompress, 24 bytes, the spec's "zap zero page"): fill
// [offset, offset+length) with `value` (always 0 from us); `offset` is in the destination's
// RAM offset space, inside block `block`.
struct Compress {
    uint32_t value = 0;
    uint32_t block = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    bool operator==(const Compress&) const = default;
};
constexpr size_t kCompressSize = 24;

// A whole control message: header + data.
struct Message {
    Header header;
    std::vector<uint8_t> data;
};

std::vector<uint8_t> encode_message(Command type, uint32_t repeat, std::span<const uint8_t> data);
// Checks the header against what arrived, as QEMU's messages require: type known, length ==
// bytes after the header; REGISTER/UNREGISTER REQUEST and COMPRESS: repeat 1..4096 entries of
// exactly length bytes; REGISTER RESULT and RAM BLOCKS RESULT: whole entries (QEMU puts the
// count in the length there, not in repeat); READY, RAM BLOCKS REQUEST, REGISTER FINISHED and
// UNREGISTER FINISHED: no data.
Result<Message> decode_message(std::span<const uint8_t> bytes);

// Inside TLS (kCapTls) the control messages are a byte stream: a header, then the data it
// announces. The whole message's size from its header (the first kHeaderSize bytes of
// `header`), refused when it would not fit a control buffer, before anything more is read.
Result<size_t> message_size_in_stream(std::span<const uint8_t> header);

std::vector<uint8_t> encode_blocks(const std::vector<BlockDesc>& blocks);
Result<std::vector<BlockDesc>> decode_blocks(const Message& m);
std::vector<uint8_t> encode_register_entries(Command type, const std::vector<RegisterEntry>& entries);
Result<std::vector<RegisterEntry>> decode_register_entries(const Message& m);
std::vector<uint8_t> encode_register_results(const std::vector<RegisterResult>& results);
Result<std::vector<RegisterResult>> decode_register_results(const Message& m);
std::vector<uint8_t> encode_compress(const std::vector<Compress>& entries);
Result<std::vector<Compress>> decode_compress(const Message& m);
// With kCapErrorText the reason travels (≤ 1024 bytes); a base-protocol peer gets QEMU's
// empty ERROR.
std::vector<uint8_t> encode_error(const std::string& reason, bool with_text = true);
std::string decode_error(const Message& m);
// SUMS (kCapSums): `repeat` entries of {u32 block, u32 count, u64 offset} followed by `count`
// u64 XXH3-64 sums, one per 4 KiB page from `offset` in the block (an offset in the block, not
// in the RAM offset space). The source sends a page's sum only once its RDMA WRITE (or its
// COMPRESS) is known to be in the destination's memory, so the destination can check it at once.
struct SumsEntry {
    uint32_t block = 0;
    uint64_t offset = 0;
    std::vector<uint64_t> sums;
    bool operator==(const SumsEntry&) const = default;
};
constexpr size_t kSumsEntryHeaderSize = 16;
// Sums one SUMS message carries at most (128 KiB of them: well inside the control buffer).
constexpr size_t kMaxSumsPerMessage = 16384;
std::vector<uint8_t> encode_sums(const std::vector<SumsEntry>& entries);
// Checks that the entries fill the message exactly, each with 1 or more sums; block and range
// are the caller's to check against its blocks.
Result<std::vector<SumsEntry>> decode_sums(const Message& m);
// A message with no data (ready, register finished, unregister finished, ram blocks request).
std::vector<uint8_t> encode_empty(Command type);

}  // namespace rdma_migrate
