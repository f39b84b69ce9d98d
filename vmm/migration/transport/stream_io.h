// The migration stream's records read off a ByteStream: each reads exactly the bytes the wire
// format (wire/stream_format.h, wire/page_sums.h) says come next and hands them to its decoder,
// so a peer's bytes are checked by the same code whether they come from a socket, a plugin's
// control channel or a fuzzer's buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/stream/byte_stream.h"
#include "vmm/migration/wire/return_path.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

// Reads and checks magic, version and body; says what is wrong in one line.
Result<StreamHeader> read_header(stream::ByteStream& in);
// The same in two steps: the magic (a foreign stream is refused here), then version and body.
Status read_magic(stream::ByteStream& in);
Result<StreamHeader> read_header_after_magic(stream::ByteStream& in);

// Reads a record's fixed part and checks it against the destination's blocks.
Result<Record> read_record(stream::ByteStream& in, const std::vector<BlockInfo>& blocks, uint32_t page_size);
Result<Reply> read_reply(stream::ByteStream& in);

// Reads one return-path message (wire/return_path.h), a RECEIVED_BITMAP with its words, a
// RECEIVED_ROUNDS with its rounds.
struct ReturnRead {
    ReturnMessage message;
    std::vector<uint64_t> words;
    std::vector<uint32_t> rounds;
};
Result<ReturnRead> read_return(stream::ByteStream& in, const std::vector<BlockInfo>& blocks, uint32_t page_size);

// Reads a PAGES_SUMMED record's sums: one per page of `length` bytes (at most 4 MiB of pages).
Status read_page_sums(stream::ByteStream& in, uint64_t length, std::vector<uint64_t>& sums);

}  // namespace vmm::migration
