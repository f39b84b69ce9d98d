// PagemapReader: which pages of a RAM block the host has ever populated (present in RAM or in
// swap), from /proc/self/pagemap. A migration skips the rest without reading it: a 16 GiB
// guest that touched 100 MiB costs 100 MiB, not 16 GiB (and reading untouched memory would
// not even allocate it, but would still cost the scan).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "vmm/common/fd.h"
#include "vmm/common/result.h"
#include "vmm/memory/ram_block.h"

namespace vmm::memory {

class PagemapReader {
public:
    // Fails when pagemap cannot be read (then callers treat every page as populated).
    static Result<PagemapReader> open();

    // Calls fn(first_page, count) for each run of populated pages of `block`, in order.
    Status for_each_populated_run(const RamBlock& block, const std::function<Status(uint64_t, uint64_t)>& fn);
    // How many pages of `block` are populated now (one pass over its pagemap: 8 bytes a page).
    Result<uint64_t> populated_pages(const RamBlock& block);

private:
    explicit PagemapReader(UniqueFd fd) : fd_(std::move(fd)) {}
    UniqueFd fd_;
    std::vector<uint64_t> entries_;
};

// The pages of `block` a bulk round sends: the populated ones, or every one where pagemap cannot
// tell (no reader, a failed read, a block mapped from a file).
uint64_t pages_to_send(PagemapReader* pagemap, const RamBlock& block);

}  // namespace vmm::memory
