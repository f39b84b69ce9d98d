// GuestMemory: the VM's RAM blocks and the one bounds-checked accessor through which the VMM
// touches guest-physical memory. Every VMM write marks the pages it touched dirty, so the
// dirty set is always KVM's log OR the VMM's own writes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "vmm/common/result.h"
#include "vmm/kvm/vm.h"
#include "vmm/memory/ram_block.h"

namespace vmm::memory {

class GuestMemory {
public:
    // Validates names (unique), alignment and overlaps, then maps every block.
    static Result<GuestMemory> create(const std::vector<RamBlockSpec>& specs);

    // Makes each block a KVM memory slot, with dirty logging on.
    Status register_slots(kvm::Vm& vm) const;

    const std::vector<std::unique_ptr<RamBlock>>& blocks() const { return blocks_; }
    RamBlock* find(uint64_t gpa) const;
    RamBlock* find_by_name(std::string_view name) const;
    RamBlock* find_by_slot(uint32_t slot) const;
    uint64_t total_size() const;

    // [gpa, gpa+len) must lie inside one block; checks overflow too. Does not mark dirty.
    Result<std::span<uint8_t>> host_span(uint64_t gpa, uint64_t len) const;
    Status read(uint64_t gpa, std::span<uint8_t> out) const;
    Status write(uint64_t gpa, std::span<const uint8_t> data) const;
    Status fill(uint64_t gpa, uint64_t len, uint8_t byte) const;
    template <typename T>
    Status write_value(uint64_t gpa, const T& v) const {
        return write(gpa, {reinterpret_cast<const uint8_t*>(&v), sizeof(T)});
    }
    template <typename T>
    Result<T> read_value(uint64_t gpa) const {
        T v{};
        if (auto s = read(gpa, {reinterpret_cast<uint8_t*>(&v), sizeof(T)}); !s) return s.error();
        return v;
    }
    // Marks [gpa, gpa+len) dirty in its block (for writes made through host_span()).
    void mark_dirty(uint64_t gpa, uint64_t len) const;

private:
    explicit GuestMemory(std::vector<std::unique_ptr<RamBlock>> blocks) : blocks_(std::move(blocks)) {}

    std::vector<std::unique_ptr<RamBlock>> blocks_;
};

}  // namespace vmm::memory
