// Long-mode set-up the VMM does instead of firmware: a GDT, identity-mapped page tables and
// the special registers of a vCPU already in 64-bit mode.
#pragma once

#include "vmm/kvm/uapi.h"

#include <cstdint>

#include "vmm/common/result.h"
#include "vmm/memory/guest_memory.h"

namespace vmm::machine {

// Writes the GDT (null, 64-bit code 0x8, data 0x10) at VMM_BOOT_GDT.
Status write_gdt(const memory::GuestMemory& mem);

// Identity-maps [0, map_bytes) with 2 MiB pages (map_bytes rounded up to 1 GiB). Returns CR3.
Result<uint64_t> write_page_tables(const memory::GuestMemory& mem, uint64_t map_bytes);

// `base` is what KVM_GET_SREGS returned for a fresh vCPU; returns it switched to long mode.
kvm_sregs long_mode_sregs(kvm_sregs base, uint64_t cr3);

}  // namespace vmm::machine
