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
constexpr size_t kControlBufferSize = 512 * 1024;  // each posted SEND/RECV buffer

// Private data exchanged by RDMA-CM at connect/accept: the spec's {version, flags}, then our
// extension for several queue pairs (the spec's area holds 192 bytes; we use 24).
constexpr uint32_t kCapPinAll = 1u << 0;        // the spec's one capability (QEMU's value)
constexpr uint32_t kCapChannels = 1u << 1;      // ours: this connection is one of N channels
constexpr uint32_t kKnownCaps = kCapPinAll | kCapChannels;

struct PrivateData {
    uint32_t version = kProtocolVersion;
    uint32_t flags = 0;
    uint32_t channel = 0;        // index of this connection, < channels
    uint32_t channels = 1;       // how many connections the migration uses
    uint64_t session = 0;        // ties the channels of one migration together
    uint32_t chunk_shift = 20;   // log2 of the source's chunk size: both sides must agree
    bool operator==(const PrivateData&) const = default;
};
constexpr size_t kPrivateDataSize = 32;
constexpr size_t kPrivateDataMax = 56;  // RDMA-CM's limit for RC connect private data

std::vector<uint8_t> encode_private_data(const PrivateData& p);
// Accepts the spec's 8-byte form too (one channel). Another version → a clear error.
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
};
const char* to_string(Command c);

constexpr size_t kHeaderSize = 12;  // length, type, repeat

struct Header {
    uint32_t length = 0;  // of the data portion
    Command type = Command::none;
    uint32_t repeat = 1;
};

// One RAM block as the other side describes it (RAM Blocks result entry, 96 bytes).
struct BlockDesc {
    std::string name;          // ≤ 63 bytes
    uint64_t host_addr = 0;    // the describer's virtual address of the block
    uint64_t guest_addr = 0;
    uint64_t length = 0;
    uint32_t rkey = 0;         // pin-all: the whole block's rkey (destination); else 0
    bool operator==(const BlockDesc&) const = default;
};
constexpr size_t kBlockDescSize = 96;

// Register request / unregister request entry (24 bytes): chunks [first, first+count) of a block.
struct ChunkRange {
    uint32_t block = 0;
    uint64_t first = 0;
    uint64_t count = 0;
    bool operator==(const ChunkRange&) const = default;
};
constexpr size_t kChunkRangeSize = 24;

// Register result entry (16 bytes): where the registered range starts on the destination.
struct RegisterResult {
    uint32_t rkey = 0;
    uint64_t host_addr = 0;
    bool operator==(const RegisterResult&) const = default;
};
constexpr size_t kRegisterResultSize = 16;

// Compress entry (24 bytes, the spec's "zap zero page"): fill [offset, offset+length) of a
// block with `value` (always 0 from us).
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
// Checks the header against what arrived: type known, repeat 1..4096, length == bytes after
// the header, and for typed commands length == repeat × entry size.
Result<Message> decode_message(std::span<const uint8_t> bytes);

std::vector<uint8_t> encode_blocks(const std::vector<BlockDesc>& blocks);
Result<std::vector<BlockDesc>> decode_blocks(const Message& m);
std::vector<uint8_t> encode_chunk_ranges(Command type, const std::vector<ChunkRange>& ranges);
Result<std::vector<ChunkRange>> decode_chunk_ranges(const Message& m);
std::vector<uint8_t> encode_register_results(const std::vector<RegisterResult>& results);
Result<std::vector<RegisterResult>> decode_register_results(const Message& m);
std::vector<uint8_t> encode_compress(const std::vector<Compress>& entries);
Result<std::vector<Compress>> decode_compress(const Message& m);
std::vector<uint8_t> encode_error(const std::string& reason);
std::string decode_error(const Message& m);
// A message with no data (ready, register finished, unregister finished, ram blocks request).
std::vector<uint8_t> encode_empty(Command type);

}  // namespace rdma_migrate
