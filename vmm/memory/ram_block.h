// RamBlock: a named range of guest-physical memory backed by an anonymous host mapping (or, after
// a mapped restore, a private mapping of a saved file) and registered with KVM as one memory
// slot, with its dirty bitmap.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "vmm/common/mapping.h"
#include "vmm/common/result.h"
#include "vmm/memory/dirty_bitmap.h"

namespace vmm::memory {

enum class HugePages { none, transparent, hugetlbfs };

struct RamBlockSpec {
    std::string name;
    uint64_t guest_addr = 0;
    uint64_t size = 0;
    HugePages huge_pages = HugePages::transparent;  // like QEMU: MADV_HUGEPAGE on guest RAM
    // Populate all of it at creation (QEMU's -mem-prealloc): costs the whole size up front, and
    // spares an incoming migration the zeroing of every fresh page it receives.
    bool prealloc = false;
};

// Checks one block's own fields (alignment, size, name); overlaps are GuestMemory's business.
Status validate_block_spec(const RamBlockSpec& spec);

class RamBlock {
public:
    // Maps the host memory (MAP_NORESERVE: untouched guest memory costs nothing).
    static Result<RamBlock> create(const RamBlockSpec& spec, uint32_t slot);

    const std::string& name() const { return name_; }
    uint64_t guest_addr() const { return guest_addr_; }
    uint64_t size() const { return host_.size(); }
    uint64_t pages() const { return size() >> kPageShift; }
    uint8_t* host() const { return host_.data(); }
    uint32_t slot() const { return slot_; }
    bool contains(uint64_t gpa) const { return gpa >= guest_addr_ && gpa - guest_addr_ < size(); }

    // The block's memory becomes `fd` from `offset`, mapped privately in place (a restore that
    // maps its saved file): a page reads the file's contents until the guest writes it, and
    // vmm processes that map one file share what none of them wrote. Before the guest runs.
    Status map_file(int fd, uint64_t offset);
    // The reverse, while the guest is paused: every page as it reads now is copied into
    // anonymous memory that takes the mapping's place at the same address (the file may then
    // change, or shrink, without the guest seeing it). Zero pages stay unpopulated.
    Status copy_out_of_file();
    // Mapped from a file: pagemap cannot tell which of its pages hold data (one never touched
    // still holds the file's), so a migration reads every page of it.
    bool file_backed() const { return file_backed_; }

    DirtyBitmap& dirty() { return dirty_; }
    const DirtyBitmap& dirty() const { return dirty_; }
    // Page-dirtying events seen since the block was created (KVM's and the VMM's own writes):
    // unlike dirty().count(), this keeps growing while the guest rewrites the same pages.
    void add_dirtied(uint64_t pages) { dirtied_.fetch_add(pages, std::memory_order_relaxed); }
    uint64_t dirtied() const { return dirtied_.load(std::memory_order_relaxed); }
    // The pages KVM saw written since the dirty-rate sampler last took them: the guest's working
    // set over the sampler's window (dirty_rate.h), apart from what a migration takes.
    DirtyBitmap& recent() { return recent_; }

private:
    RamBlock(std::string name, uint64_t gpa, Mapping host, uint32_t slot);
public:
    RamBlock(RamBlock&& o) noexcept;
    RamBlock& operator=(RamBlock&&) = delete;
private:

    std::string name_;
    uint64_t guest_addr_;
    Mapping host_;
    uint32_t slot_;
    DirtyBitmap dirty_;
    DirtyBitmap recent_;
    std::atomic<uint64_t> dirtied_{0};
    bool file_backed_ = false;
};

}  // namespace vmm::memory
