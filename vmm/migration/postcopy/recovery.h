// Postcopy recovery: what the two sides tell each other when a broken postcopy resumes on a new
// connection (`migrate_recover URI` on the destination, `migrate -r URI` on the source).
//
// The source opens the connection with a header that has kFeaturePostcopyResume; the
// destination answers HEADER_OK, then sends, block by block and in page order, RECEIVED_BITMAP
// messages covering every page of every block (bit set: the destination holds the page). The
// source must send again every page it had to send at the switch that the destination does not
// hold: what was in flight when the link broke is lost, whatever the source had sent.
// Pure: no I/O; the peer's messages are checked as they come.
#pragma once

#include <cstdint>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/return_path.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

// The destination's side: the RECEIVED_BITMAP messages for `missing` (bit per page the
// destination still lacks, one vector per block), in order, at most kMaxBitmapPages each.
std::vector<std::vector<uint8_t>> encode_received_pages(const std::vector<BlockInfo>& blocks,
                                                        const std::vector<std::vector<uint64_t>>& missing);

// The source's side: collects the destination's RECEIVED_BITMAP messages (already checked
// against the blocks by decode_return) and refuses any that is out of order, so that every page
// is described exactly once.
class ReceivedPages {
public:
    explicit ReceivedPages(const std::vector<BlockInfo>& blocks);
    Status add(const ReturnMessage& m, const std::vector<uint64_t>& words);
    // Every page of every block has been described.
    bool complete() const;
    // bits()[b]: block b's pages the destination holds.
    const std::vector<std::vector<uint64_t>>& bits() const { return bits_; }

private:
    std::vector<uint64_t> pages_;   // per block
    std::vector<uint64_t> next_;    // per block: the first page not yet described
    std::vector<std::vector<uint64_t>> bits_;
};

}  // namespace vmm::migration
