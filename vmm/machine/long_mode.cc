#include "vmm/machine/long_mode.h"

#include <fmt/format.h>

#include "vmm/machine/boot_abi.h"

namespace vmm::machine {

namespace {
constexpr uint64_t kGdt[] = {
    0,                      // null
    0x00af9b000000ffffull,  // 0x08: code, 64-bit, present, ring 0
    0x00cf93000000ffffull,  // 0x10: data, present, ring 0
};
constexpr uint64_t kPresent = 1, kWritable = 2, kHuge = 0x80;
constexpr uint64_t kCr0Pe = 1, kCr0Mp = 2, kCr0Et = 0x10, kCr0Ne = 0x20, kCr0Wp = 0x10000,
                   kCr0Pg = 0x80000000;
constexpr uint64_t kCr4Pae = 0x20, kCr4Osfxsr = 0x200, kCr4Osxmmexcpt = 0x400;
constexpr uint64_t kEferLme = 0x100, kEferLma = 0x400;

kvm_segment flat_segment(uint16_t selector, uint8_t type, bool code) {
    kvm_segment s{};
    s.base = 0;
    s.limit = 0xffffffff;
    s.selector = selector;
    s.type = type;
    s.present = 1;
    s.dpl = 0;
    s.db = code ? 0 : 1;
    s.s = 1;
    s.l = code ? 1 : 0;
    s.g = 1;
    return s;
}
}  // namespace

Status write_gdt(const memory::GuestMemory& mem) {
    return mem.write(VMM_BOOT_GDT, {reinterpret_cast<const uint8_t*>(kGdt), sizeof(kGdt)});
}

Result<uint64_t> write_page_tables(const memory::GuestMemory& mem, uint64_t map_bytes) {
    uint64_t gib = (map_bytes + (1ull << 30) - 1) >> 30;
    if (gib == 0) gib = 1;
    uint64_t pml4 = VMM_BOOT_PAGE_TABLES, pdpt = pml4 + 0x1000, pd0 = pdpt + 0x1000;
    uint64_t max_gib = (VMM_BOOT_PAGE_TABLES_END - pd0) / 0x1000;
    if (gib > max_gib || gib > 512) {
        return Error(fmt::format("guest-physical space of {} GiB exceeds the {} GiB the boot page "
                                 "tables map",
                                 gib, std::min<uint64_t>(max_gib, 512)));
    }
    if (auto s = mem.fill(pml4, VMM_BOOT_PAGE_TABLES_END - pml4, 0); !s) return s.error();
    if (auto s = mem.write_value<uint64_t>(pml4, pdpt | kPresent | kWritable); !s) return s.error();
    for (uint64_t g = 0; g < gib; ++g) {
        uint64_t pd = pd0 + g * 0x1000;
        if (auto s = mem.write_value<uint64_t>(pdpt + 8 * g, pd | kPresent | kWritable); !s) return s.error();
        std::vector<uint64_t> entries(512);
        for (uint64_t i = 0; i < 512; ++i)
            entries[i] = ((g << 30) + (i << 21)) | kPresent | kWritable | kHuge;
        if (auto s = mem.write(pd, {reinterpret_cast<const uint8_t*>(entries.data()), 4096}); !s) {
            return s.error();
        }
    }
    return pml4;
}

kvm_sregs long_mode_sregs(kvm_sregs s, uint64_t cr3) {
    s.cs = flat_segment(0x08, 0xb, true);
    s.ds = s.es = s.fs = s.gs = s.ss = flat_segment(0x10, 0x3, false);
    s.gdt.base = VMM_BOOT_GDT;
    s.gdt.limit = sizeof(kGdt) - 1;
    s.idt.base = 0;
    s.idt.limit = 0;  // no IDT: an exception becomes a triple fault, reported as a shutdown
    s.cr0 = kCr0Pe | kCr0Mp | kCr0Et | kCr0Ne | kCr0Wp | kCr0Pg;
    s.cr3 = cr3;
    s.cr4 = kCr4Pae | kCr4Osfxsr | kCr4Osxmmexcpt;
    s.efer = kEferLme | kEferLma;
    return s;
}

}  // namespace vmm::machine
