/* How the VMM hands control to a payload: shared by the VMM (C++) and the payloads (C).
 *
 * Every vCPU starts in 64-bit long mode at the ELF entry point, with paging on (identity map of
 * the low guest-physical space by 2 MiB pages), interrupts off, and:
 *   rdi = guest-physical address of a struct vmm_boot_info
 *   rsi = the vCPU's index (0 .. cpu_count-1)
 * The payload sets up its own stack. A multiboot loader (QEMU -kernel) enters the payload's
 * 32-bit stub instead, which builds the same struct from the multiboot information.
 */
#ifndef VMM_MACHINE_BOOT_ABI_H
#define VMM_MACHINE_BOOT_ABI_H

#include <stdint.h>

#define VMM_BOOT_MAGIC 0x31544f4f424d4d56ull /* "VMMBOOT1" */
#define VMM_BOOT_MAX_RAM 8
#define VMM_BOOT_F_CONTROL 1u /* the guest control device is present */

struct vmm_boot_ram {
    uint64_t addr;
    uint64_t size;
};

struct vmm_boot_info {
    uint64_t magic;
    uint32_t cpu_count;
    uint32_t ram_count;
    uint64_t cmdline_addr; /* NUL-terminated "key=value key=value" */
    uint32_t cmdline_len;
    uint32_t flags;
    struct vmm_boot_ram ram[VMM_BOOT_MAX_RAM];
};

/* Guest-physical layout the VMM uses before the payload runs. */
#define VMM_BOOT_GDT 0x1000ull
#define VMM_BOOT_INFO 0x2000ull
#define VMM_BOOT_CMDLINE 0x2100ull
#define VMM_BOOT_CMDLINE_MAX 0xf00ull
#define VMM_BOOT_PAGE_TABLES 0x10000ull
#define VMM_BOOT_PAGE_TABLES_END 0x9f000ull
#define VMM_BOOT_PAYLOAD_MIN 0x100000ull /* payload segments start at or above 1 MiB */

#endif
