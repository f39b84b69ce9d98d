/* Builds a struct vmm_boot_info from multiboot information, for payloads started by QEMU
 * (-kernel payload.elf -append "bytes=64M ..."). Only the boot CPU runs there. */
#include "runtime.h"

struct multiboot_info {
    uint32_t flags;
    uint32_t mem_lower;
    uint32_t mem_upper;
    uint32_t boot_device;
    uint32_t cmdline;
};

static struct vmm_boot_info g_mb_info;

struct vmm_boot_info *multiboot_boot_info(uint32_t mbi_addr);
struct vmm_boot_info *multiboot_boot_info(uint32_t mbi_addr) {
    const struct multiboot_info *mbi = (const struct multiboot_info *)(uintptr_t)mbi_addr;
    g_mb_info.magic = VMM_BOOT_MAGIC;
    g_mb_info.cpu_count = 1;
    g_mb_info.flags = 0;
    if (mbi->flags & 1) {
        g_mb_info.ram_count = 1;
        g_mb_info.ram[0].addr = 0;
        g_mb_info.ram[0].size = (1u << 20) + (uint64_t)mbi->mem_upper * 1024;
    }
    if (mbi->flags & 4) {
        const char *c = (const char *)(uintptr_t)mbi->cmdline;
        uint32_t n = 0;
        while (c[n]) ++n;
        g_mb_info.cmdline_addr = mbi->cmdline;
        g_mb_info.cmdline_len = n;
    }
    return &g_mb_info;
}
