/* stress: rewrites memory over and over, like `stress --vm-bytes N --vm-keep`. Every CPU takes
 * an equal share of [base, base+bytes) and writes one 64-bit word every `stride` bytes of it per
 * pass (stride=4096 dirties every page at the lowest cost; stride=8 rewrites every byte).
 * CPU 0 reports each pass as a step and prints a line about once a second. Every CPU reads the
 * control device's clock every `clock` pages: the device times the gaps between a CPU's reads,
 * so a vCPU held up (a postcopy fault, a pause) shows as a long gap: the guest's own view.
 * Parameters: bytes=SIZE (default 64M) base=ADDR (default 4M) stride=N (default 4096)
 *             clock=N pages between clock reads (default 64; 0: none)
 *             passes=N (default 0: forever; then exits the machine with code 0)
 *             zero=1 (write zeros: memory populated but all zero, for zero-page paths) */
#include "lib/runtime.h"

static volatile uint64_t g_done_cpus;

static void announce(const struct vmm_boot_info *info, uint64_t base, uint64_t bytes, uint64_t stride) {
    put_str("stress: ");
    put_size(bytes);
    put_str(" at ");
    put_hex(base);
    put_str(", stride ");
    put_u64(stride);
    put_str(", ");
    put_u64(info->cpu_count);
    put_str(" cpu(s)\n");
}

void payload_main(const struct vmm_boot_info *info, uint32_t cpu) {
    uint64_t base, bytes;
    if (!work_region(info, 64u << 20, &base, &bytes)) halt_forever();
    uint64_t stride = param_u64("stride", 4096);
    uint64_t passes = param_u64("passes", 0);
    uint64_t zero = param_u64("zero", 0);
    uint64_t span = param_u64("clock", 64) * 4096; /* bytes between clock reads */
    int timed = span != 0 && ctl_present();
    if (stride < 8 || (stride & 7) != 0) stride = 4096;
    uint64_t share = (bytes / info->cpu_count) & ~(uint64_t)4095;
    uint64_t start = base + share * cpu;
    uint64_t end = cpu + 1 == info->cpu_count ? base + bytes : start + share;
    if (cpu == 0) announce(info, base, bytes, stride);
    uint64_t last_print = ctl_clock_ns();
    for (uint64_t pass = 1; passes == 0 || pass <= passes; ++pass) {
        if (!timed) span = end - start;
        for (uint64_t chunk = start; chunk < end; chunk += span) {
            uint64_t stop = end - chunk > span ? chunk + span : end;
            for (uint64_t a = chunk; a < stop; a += stride) *(volatile uint64_t *)(uintptr_t)a = zero ? 0 : pass ^ a;
            if (timed) (void)ctl_clock_ns();
        }
        if (cpu != 0) continue;
        ctl_command(VMMC_CMD_STEP, pass);
        ctl_command(VMMC_CMD_PROGRESS, pass);
        uint64_t now = ctl_clock_ns();
        if (now - last_print >= 1000000000ull || pass == 1 || (!ctl_present() && (pass & 1023) == 0)) {
            put_str("stress: pass ");
            put_u64(pass);
            put_str("\n");
            last_print = now;
        }
    }
    __atomic_add_fetch(&g_done_cpus, 1, __ATOMIC_SEQ_CST);
    if (cpu != 0) halt_forever();
    while (g_done_cpus < info->cpu_count) cpu_relax();
    ctl_message("stress: done");
    ctl_command(VMMC_CMD_RESULT, passes);
    ctl_command(VMMC_CMD_EXIT, 0);
}
