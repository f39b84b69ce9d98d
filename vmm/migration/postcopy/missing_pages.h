// MissingPages: which guest pages the destination still lacks in postcopy. Filled from the
// source's DISCARD ranges at the switch; a page leaves the set once placed, by whichever path
// placed it first. A fault on a page outside the set is one the destination can settle alone:
// the page is zero on the source (sent as ZERO, or never populated there). Thread-safe: the
// receiving thread places, the fault thread asks.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "vmm/migration/wire/stream_format.h"

namespace vmm::migration {

struct PageRef {
    uint32_t block = 0;
    uint64_t page = 0;  // index in the block
};

class MissingPages {
public:
    // `hosts[i]` is where block i lives in this process (blocks[i].size bytes).
    MissingPages(std::vector<BlockInfo> blocks, std::vector<uint8_t*> hosts);

    // Before the guest runs: the range (checked by the decoder) is missing.
    void add(uint32_t block, uint64_t first_page, uint64_t count);
    // The block and page of a host address, if it lies in guest RAM.
    std::optional<PageRef> locate(uint64_t address) const;
    uint8_t* host(uint32_t block, uint64_t page) const { return hosts_[block] + page * kStreamPageSize; }
    bool missing(PageRef p) const;
    // The range has been placed: its pages leave the set. Returns how many were in it.
    uint64_t placed(uint32_t block, uint64_t first_page, uint64_t count);
    uint64_t remaining() const;
    // A copy of the set: per block, a bit per page still missing.
    std::vector<std::vector<uint64_t>> snapshot() const;
    uint64_t total() const { return total_; }

private:
    bool test(uint32_t block, uint64_t page) const {
        return (bits_[block][page / 64] >> (page % 64)) & 1;
    }
    std::vector<BlockInfo> blocks_;
    std::vector<uint8_t*> hosts_;
    mutable std::mutex mutex_;
    std::vector<std::vector<uint64_t>> bits_;
    uint64_t remaining_ = 0;
    uint64_t total_ = 0;
};

}  // namespace vmm::migration
