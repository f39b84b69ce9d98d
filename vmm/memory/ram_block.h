// RamBlock: a named range of guest-physical memory backed by an anonymous host mapping and
// registered with KVM as one memory slot, with its dirty bitmap.
#pragma once

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
    HugePages huge_pages = HugePages::none;
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

    DirtyBitmap& dirty() { return dirty_; }
    const DirtyBitmap& dirty() const { return dirty_; }

private:
    RamBlock(std::string name, uint64_t gpa, Mapping host, uint32_t slot);

    std::string name_;
    uint64_t guest_addr_;
    Mapping host_;
    uint32_t slot_;
    DirtyBitmap dirty_;
};

}  // namespace vmm::memory
