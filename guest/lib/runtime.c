#include "runtime.h"

#define COM1 0x3f8

static int g_ctl = -1;
static const struct vmm_boot_info *g_info;

void put_str(const char *s) {
    while (*s) outb(COM1, (uint8_t)*s++);
}

void put_u64(uint64_t v) {
    char buf[21];
    int i = 20;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put_str(buf + i);
}

void put_hex(uint64_t v) {
    char buf[19];
    buf[0] = '0';
    buf[1] = 'x';
    for (int i = 0; i < 16; ++i) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
    buf[18] = 0;
    put_str(buf);
}

void put_size(uint64_t bytes) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++u;
    }
    put_u64(bytes);
    put_str(" ");
    put_str(units[u]);
}

int ctl_present(void) {
    /* ctl=0: behave as if there were none (as under QEMU: no exits but the serial port's) */
    if (g_ctl < 0)
        g_ctl = (g_info && (g_info->flags & VMM_BOOT_F_CONTROL) && param_u64("ctl", 1) != 0 && inl(VMMC_BASE) == VMMC_ID)
                    ? 1
                    : 0;
    return g_ctl;
}

void ctl_command(uint32_t cmd, uint64_t arg) {
    if (!ctl_present()) return;
    outl(VMMC_BASE + VMMC_REG_ARG_LO_CLOCK_LO, (uint32_t)arg);
    outl(VMMC_BASE + VMMC_REG_ARG_HI_CLOCK_HI, (uint32_t)(arg >> 32));
    outl(VMMC_BASE + VMMC_REG_ID_CMD, cmd);
}

uint64_t ctl_clock_ns(void) {
    if (!ctl_present()) return 0;
    uint32_t lo = inl(VMMC_BASE + VMMC_REG_ARG_LO_CLOCK_LO);
    uint32_t hi = inl(VMMC_BASE + VMMC_REG_ARG_HI_CLOCK_HI);
    return ((uint64_t)hi << 32) | lo;
}

void ctl_sleep_ns(uint64_t ns) {
    if (ctl_present()) {
        ctl_command(VMMC_CMD_SLEEP, ns);
        return;
    }
    for (uint64_t i = 0; i < ns / 64; ++i) cpu_relax(); /* no device: a rough spin */
}

void ctl_message(const char *s) {
    put_str(s);
    put_str("\n");
    if (!ctl_present()) return;
    while (*s) outb(VMMC_BASE + VMMC_REG_MESSAGE, (uint8_t)*s++);
    outb(VMMC_BASE + VMMC_REG_MESSAGE, '\n');
}

static int key_matches(const char *p, const char *name) {
    while (*name && *p == *name) {
        ++p;
        ++name;
    }
    return *name == 0 && *p == '=';
}

static uint64_t parse_value(const char *p) {
    uint64_t v = 0;
    int base = 10;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    for (;; ++p) {
        int d;
        if (*p >= '0' && *p <= '9') d = *p - '0';
        else if (base == 16 && *p >= 'a' && *p <= 'f') d = *p - 'a' + 10;
        else if (base == 16 && *p >= 'A' && *p <= 'F') d = *p - 'A' + 10;
        else break;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    switch (*p) {
        case 'k': case 'K': return v << 10;
        case 'm': case 'M': return v << 20;
        case 'g': case 'G': return v << 30;
        default: return v;
    }
}

uint64_t param_u64(const char *name, uint64_t fallback) {
    if (!g_info || !g_info->cmdline_addr) return fallback;
    const char *p = (const char *)(uintptr_t)g_info->cmdline_addr;
    while (*p) {
        while (*p == ' ') ++p;
        if (key_matches(p, name)) {
            while (*p != '=') ++p;
            return parse_value(p + 1);
        }
        while (*p && *p != ' ') ++p;
    }
    return fallback;
}

int work_region(const struct vmm_boot_info *info, uint64_t default_bytes, uint64_t *base, uint64_t *bytes) {
    *base = param_u64("base", 4u << 20);
    *bytes = param_u64("bytes", default_bytes);
    for (uint32_t i = 0; i < info->ram_count && i < VMM_BOOT_MAX_RAM; ++i) {
        const struct vmm_boot_ram *r = &info->ram[i];
        if (*base < r->addr || *base - r->addr >= r->size) continue;
        uint64_t room = r->size - (*base - r->addr);
        if (*bytes > room) *bytes = room;
        *bytes &= ~(uint64_t)4095;
        return *bytes != 0;
    }
    put_str("payload: base ");
    put_hex(*base);
    put_str(" is not in RAM\n");
    return 0;
}

void payload_start(const struct vmm_boot_info *info, uint32_t cpu);
void payload_start(const struct vmm_boot_info *info, uint32_t cpu) {
    if (info->magic != VMM_BOOT_MAGIC) {
        put_str("payload: bad boot info magic\n");
        halt_forever();
    }
    if (cpu == 0) {
        traps_build();
        __atomic_store_n(&g_info, info, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&g_info, __ATOMIC_ACQUIRE) == 0) cpu_relax();
    }
    traps_load();
    payload_main(info, cpu);
    halt_forever();
}
