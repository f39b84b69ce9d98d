#include "vmm/memory/guest_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace vmm::memory {

static Status check_layout(const std::vector<RamBlockSpec>& specs) {
    if (specs.empty()) return Error("the machine has no RAM blocks: configure at least one");
    for (size_t i = 0; i < specs.size(); ++i) {
        if (auto s = validate_block_spec(specs[i]); !s) return s;
        for (size_t j = 0; j < i; ++j) {
            const auto& a = specs[i];
            const auto& b = specs[j];
            if (a.name == b.name) return Error(fmt::format("RAM block name '{}' is used twice", a.name));
            if (a.guest_addr < b.guest_addr + b.size && b.guest_addr < a.guest_addr + a.size) {
                return Error(fmt::format("RAM blocks '{}' and '{}' overlap", a.name, b.name));
            }
        }
    }
    return {};
}

Result<GuestMemory> GuestMemory::create(const std::vector<RamBlockSpec>& specs) {
    if (auto s = check_layout(specs); !s) return s.error();
    std::vector<std::unique_ptr<RamBlock>> blocks;
    for (size_t i = 0; i < specs.size(); ++i) {
        auto b = RamBlock::create(specs[i], static_cast<uint32_t>(i));
        if (!b) return b.error();
        blocks.push_back(std::make_unique<RamBlock>(std::move(*b)));
    }
    return GuestMemory(std::move(blocks));
}

Status GuestMemory::register_slots(kvm::Vm& vm) const {
    for (const auto& b : blocks_) {
        kvm_userspace_memory_region r{};
        r.slot = b->slot();
        r.flags = KVM_MEM_LOG_DIRTY_PAGES;
        r.guest_phys_addr = b->guest_addr();
        r.memory_size = b->size();
        r.userspace_addr = reinterpret_cast<uint64_t>(b->host());
        if (auto s = vm.set_user_memory_region(r); !s) {
            return s.error().context(fmt::format("RAM block '{}'", b->name()));
        }
    }
    return {};
}

RamBlock* GuestMemory::find(uint64_t gpa) const {
    for (const auto& b : blocks_)
        if (b->contains(gpa)) return b.get();
    return nullptr;
}

RamBlock* GuestMemory::find_by_name(std::string_view name) const {
    for (const auto& b : blocks_)
        if (b->name() == name) return b.get();
    return nullptr;
}

RamBlock* GuestMemory::find_by_slot(uint32_t slot) const {
    for (const auto& b : blocks_)
        if (b->slot() == slot) return b.get();
    return nullptr;
}

uint64_t GuestMemory::total_size() const {
    uint64_t n = 0;
    for (const auto& b : blocks_) n += b->size();
    return n;
}

Result<std::span<uint8_t>> GuestMemory::host_span(uint64_t gpa, uint64_t len) const {
    RamBlock* b = find(gpa);
    uint64_t off = b ? gpa - b->guest_addr() : 0;
    if (b == nullptr || len > b->size() - off) {
        return Error(fmt::format("guest address range [{:#x}, +{:#x}) is not inside one RAM block",
                                 gpa, len));
    }
    return std::span<uint8_t>(b->host() + off, len);
}

Status GuestMemory::read(uint64_t gpa, std::span<uint8_t> out) const {
    auto s = host_span(gpa, out.size());
    if (!s) return s.error();
    if (!out.empty()) std::memcpy(out.data(), s->data(), out.size());
    return {};
}

Status GuestMemory::write(uint64_t gpa, std::span<const uint8_t> data) const {
    auto s = host_span(gpa, data.size());
    if (!s) return s.error();
    if (!data.empty()) std::memcpy(s->data(), data.data(), data.size());
    mark_dirty(gpa, data.size());
    return {};
}

Status GuestMemory::fill(uint64_t gpa, uint64_t len, uint8_t byte) const {
    auto s = host_span(gpa, len);
    if (!s) return s.error();
    std::memset(s->data(), byte, len);
    mark_dirty(gpa, len);
    return {};
}

void GuestMemory::mark_dirty(uint64_t gpa, uint64_t len) const {
    if (len == 0) return;
    RamBlock* b = find(gpa);
    if (b == nullptr) return;
    uint64_t off = gpa - b->guest_addr();
    uint64_t first = off >> kPageShift;
    uint64_t last = (std::min(off + len, b->size()) - 1) >> kPageShift;
    b->dirty().set_range(first, last - first + 1);
    b->add_dirtied(last - first + 1);
}

}  // namespace vmm::memory
