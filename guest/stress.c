/* stress: rewrites memory over and over, like `stress --vm-bytes N --vm-keep`. Every CPU takes
 * an equal share of [base, base+bytes) and writes one 64-bit word every `stride` bytes of it per
 * pass (stride=4096 dirties every page at the lowest cost; stride=8 rewrites every byte).
 * CPU 0 reports each pass as a step and prints a line about once a second.
 * Two views of a vCPU held up (a postcopy fault, a pause):
 *  - the VMM's: every CPU reads the control device's clock every `clock` pages, and the device
 *    times the gaps between a CPU's reads;
 *  - the guest's own, the same under any VMM on KVM (ours, QEMU), when `stall_us` is given:
 *    every CPU reads the TSC after each page (which slows the loop: hence asked for), and a gap
 *    of `stall_us` or more between two reads is a stall. Time spent in the
 *    payload's own exits (clock reads, printing) is left out. CPU 0's line carries every CPU's
 *    stalls since boot and the TSC's time: "stalls N stalled-us T longest-us L at-ms M". It
 *    needs KVM's clock for the scale.
 * Parameters: bytes=SIZE (default 64M) base=ADDR (default 4M) stride=N (default 4096)
 *             clock=N pages between clock reads (default 64; 0: none)
 *             stall_us=N the shortest gap counted as a stall (default 0: stalls not timed)
 *             passes=N (default 0: forever; then exits the machine with code 0)
 *             zero=1 (write zeros: memory populated but all zero, for zero-page paths)
 *             fill=SIZE: before the passes, CPU 0 writes one word into every page of SIZE
 *             after the hot set, once (as far as RAM goes): memory the guest holds but no longer
 *             writes, as an idle guest's, under any VMM (a VMM-side --prefill is ours alone).
 *             rest_us=N: microseconds every CPU sleeps (in the VMM) after each pass, default 0.
 *             slow=MASK slow_rest_us=N: the CPUs in MASK (bit c: CPU c) also sleep N us after every
 *             `clock` pages they write: a guest with quiet and busy vCPUs, the quiet ones dirtying
 *             at a steady low rate (a per-vCPU dirty limit's case).
 *             Where vCPUs are emulated (nested KVM in TCG) a guest that never rests takes the
 *             CPU every other program there needs. The sleep is not counted as a stall. */
#include "lib/runtime.h"
#include "lib/tsc_clock.h"

#define MAX_TIMED_CPUS 64

/* One CPU's stalls, in TSC ticks; written by that CPU only, read by CPU 0. */
struct stalls {
    volatile uint64_t count, ticks, longest;
} __attribute__((aligned(64)));

static volatile uint64_t g_done_cpus;
static volatile int g_filled; /* fill= done (CPU 0), before any CPU's first pass */
static volatile int g_tsc_ok = -1; /* set by CPU 0 */
static struct stalls g_stalls[MAX_TIMED_CPUS];
static int g_timed; /* stalls are timed: the report line carries them */

static void announce(const struct vmm_boot_info *info, uint64_t base, uint64_t bytes, uint64_t stride,
                     int timed_stalls) {
    put_str("stress: ");
    put_size(bytes);
    put_str(" at ");
    put_hex(base);
    put_str(", stride ");
    put_u64(stride);
    put_str(", ");
    put_u64(info->cpu_count);
    put_str(" cpu(s)");
    if (timed_stalls) put_str(g_tsc_ok ? ", stalls timed by the TSC\n" : ", no KVM clock: stalls not timed\n");
    else put_str("\n");
}

/* The gap since *last: a stall when it is at least floor ticks. A TSC that went back (a VMM that
 * did not carry it over a migration) is no gap. */
static inline void note_gap(struct stalls *s, uint64_t *last, uint64_t floor) {
    uint64_t now = tsc_read();
    if (now > *last && now - *last >= floor) {
        uint64_t gap = now - *last;
        s->count = s->count + 1;
        s->ticks = s->ticks + gap;
        if (gap > s->longest) s->longest = gap;
    }
    *last = now;
}

/* Writes [a, stop) as the plain loop does (word a gets pass ^ a, or 0 when pass is 0), reading
 * the TSC after each page. */
static void write_timed(uint64_t a, uint64_t stop, uint64_t stride, uint64_t pass, struct stalls *mine,
                        uint64_t *last, uint64_t floor) {
    while (a < stop) {
        uint64_t page_end = (a | 4095) + 1 < stop ? (a | 4095) + 1 : stop;
        for (; a < page_end; a += stride) *(volatile uint64_t *)(uintptr_t)a = pass ? pass ^ a : 0;
        note_gap(mine, last, floor);
    }
}

static void print_pass(uint64_t pass, uint32_t cpus) {
    put_str("stress: pass ");
    put_u64(pass);
    if (g_timed) {
        uint64_t count = 0, ticks = 0, longest = 0;
        for (uint32_t c = 0; c < cpus && c < MAX_TIMED_CPUS; ++c) {
            count += g_stalls[c].count;
            ticks += g_stalls[c].ticks;
            if (g_stalls[c].longest > longest) longest = g_stalls[c].longest;
        }
        put_str(" stalls ");
        put_u64(count);
        put_str(" stalled-us ");
        put_u64(tsc_ns(ticks) / 1000);
        put_str(" longest-us ");
        put_u64(tsc_ns(longest) / 1000);
        put_str(" at-ms ");
        put_u64(tsc_ns(tsc_read()) / 1000000);
    }
    put_str("\n");
}

/* fill=SIZE: one word into every page of [from, from + size), clamped to the RAM range `from`
 * is in; says how much. */
static void fill_once(const struct vmm_boot_info *info, uint64_t from, uint64_t size) {
    for (uint32_t i = 0; i < info->ram_count && i < VMM_BOOT_MAX_RAM; ++i) {
        const struct vmm_boot_ram *r = &info->ram[i];
        if (from < r->addr || from - r->addr >= r->size) continue;
        uint64_t room = r->size - (from - r->addr);
        if (size > room) size = room;
        size &= ~(uint64_t)4095;
        for (uint64_t a = from; a < from + size; a += 4096) *(volatile uint64_t *)(uintptr_t)a = a | 1;
        put_str("stress: filled ");
        put_size(size);
        put_str("\n");
        return;
    }
}

/* Now in ns by whichever clock there is (0: none). */
static uint64_t now_ns(void) { return g_tsc_ok ? tsc_ns(tsc_read()) : ctl_clock_ns(); }

void payload_main(const struct vmm_boot_info *info, uint32_t cpu) {
    uint64_t base, bytes;
    if (cpu == 0) g_tsc_ok = tsc_clock_init();
    while (g_tsc_ok < 0) cpu_relax();
    if (!work_region(info, 64u << 20, &base, &bytes)) halt_forever();
    uint64_t stride = param_u64("stride", 4096);
    uint64_t passes = param_u64("passes", 0);
    uint64_t zero = param_u64("zero", 0);
    uint64_t span = param_u64("clock", 64) * 4096; /* bytes between clock reads */
    uint64_t stall_us = param_u64("stall_us", 0);
    uint64_t rest_ns = param_u64("rest_us", 0) * 1000;
    uint64_t chunk_rest_ns = cpu < 64 && ((param_u64("slow", 0) >> cpu) & 1) != 0 ? param_u64("slow_rest_us", 0) * 1000 : 0;
    uint64_t floor = ns_tsc(stall_us * 1000);
    int timed = span != 0 && ctl_present();
    struct stalls *mine = g_tsc_ok && stall_us != 0 && cpu < MAX_TIMED_CPUS ? &g_stalls[cpu] : 0;
    if (cpu == 0) g_timed = mine != 0;
    if (stride < 8 || (stride & 7) != 0) stride = 4096;
    uint64_t share = (bytes / info->cpu_count) & ~(uint64_t)4095;
    uint64_t start = base + share * cpu;
    uint64_t end = cpu + 1 == info->cpu_count ? base + bytes : start + share;
    if (cpu == 0) {
        uint64_t fill = param_u64("fill", 0);
        if (fill) fill_once(info, base + bytes, fill);
        g_filled = 1;
    }
    while (!g_filled) cpu_relax();
    if (cpu == 0) announce(info, base, bytes, stride, stall_us != 0);
    uint64_t last_print = now_ns();
    uint64_t last_tsc = tsc_read();
    for (uint64_t pass = 1; passes == 0 || pass <= passes; ++pass) {
        if (!timed) span = end - start;
        for (uint64_t chunk = start; chunk < end; chunk += span) {
            uint64_t stop = end - chunk > span ? chunk + span : end;
            if (mine) {
                write_timed(chunk, stop, stride, zero ? 0 : pass, mine, &last_tsc, floor);
            } else {
                for (uint64_t a = chunk; a < stop; a += stride) *(volatile uint64_t *)(uintptr_t)a = zero ? 0 : pass ^ a;
            }
            if (timed) {
                (void)ctl_clock_ns();
                last_tsc = tsc_read(); /* the exit is ours, not a stall */
            }
            if (chunk_rest_ns) {
                ctl_sleep_ns(chunk_rest_ns);
                last_tsc = tsc_read();
            }
        }
        if (rest_ns) {
            ctl_sleep_ns(rest_ns);
            last_tsc = tsc_read();
        }
        if (cpu != 0) continue;
        ctl_command(VMMC_CMD_STEP, pass);
        ctl_command(VMMC_CMD_PROGRESS, pass);
        uint64_t now = now_ns();
        if (now - last_print >= 1000000000ull || pass == 1 || (now == 0 && (pass & 1023) == 0)) {
            print_pass(pass, info->cpu_count);
            last_print = now;
        }
        last_tsc = tsc_read();
    }
    __atomic_add_fetch(&g_done_cpus, 1, __ATOMIC_SEQ_CST);
    if (cpu != 0) halt_forever();
    while (g_done_cpus < info->cpu_count) cpu_relax();
    ctl_message("stress: done");
    ctl_command(VMMC_CMD_RESULT, passes);
    ctl_command(VMMC_CMD_EXIT, 0);
}
