// End-to-end RAM verification (the verify-ram capability). The source sends every page record
// with the XXH3-64 of its data as it read it (PAGES_SUMMED); the destination hashes what landed
// in its guest RAM and compares, before it accepts the record.
//
// A mismatch is not always corruption. The source may hand guest RAM to the kernel without
// copying it (zero-copy-send: the kernel reads the pages when it transmits them), and a running
// guest may change a page between the source's hash and that read. Such a page arrives newer
// than its checksum, but the guest's write also marked it dirty after the source took the
// dirty bitmap, so a later round sends it again (the last round runs with the vCPUs paused).
// Corruption is a page whose last copy did not match. So a mismatch makes its pages *owed*; a
// later copy that lands (summed and matching, or a ZERO marker) settles them; at the end of the
// stream any page still owed fails the migration, naming its block and offset.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/migration/wire/page_sums.h"
#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

class RamVerifier {
public:
    // `summer`: how the source summed (keyed on an authenticated connection, page_sums.h).
    explicit RamVerifier(std::vector<BlockInfo> blocks, PageSummer summer = {})
        : blocks_(std::move(blocks)), summer_(summer), owed_(blocks_.size()) {}

    // The record's data landed at block/offset (already bounds-checked): hashes each page against
    // the source's sum for it. A matching page settles what it owed; a mismatch makes it owed.
    // Returns the pages that did not match, in order (usually none). Safe from several lanes at once.
    std::vector<uint64_t> check(uint32_t block, uint64_t offset, std::span<const uint8_t> landed,
                                std::span<const uint64_t> sums);
    // A ZERO marker (no data to hash) replaced this range: its pages are owed no more.
    void replaced(uint32_t block, uint64_t offset, uint64_t length);
    // At the end of the stream: an error naming the first page whose last copy did not match.
    Status settle() const;
    // Each page whose last copy did not match (block, page), e.g. for a resumption's report of
    // what arrived whole: such a page did not.
    void for_each_owed(const std::function<void(uint32_t, uint64_t)>& fn) const;

    uint64_t checked_bytes() const { return checked_bytes_.load(); }
    // Pages whose data did not match when they landed (a later copy may have settled them).
    uint64_t mismatches() const { return mismatches_.load(); }

private:
    void settle_range(uint32_t block, uint64_t first_page, uint64_t end_page);  // under mu_

    std::vector<BlockInfo> blocks_;
    PageSummer summer_;
    mutable std::mutex mu_;
    std::vector<std::set<uint64_t>> owed_;   // per block: pages whose last copy did not match
    std::atomic<uint64_t> owed_pages_{0};    // lets the common case skip the lock
    std::atomic<uint64_t> checked_bytes_{0}, mismatches_{0};  // mismatches: pages
};

}  // namespace vmm::migration
