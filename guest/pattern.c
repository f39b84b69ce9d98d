/* pattern: fills [base, base+bytes) with a per-page pattern (`words` 64-bit words per page,
 * each a function of its address and the seed), then re-checks it sparsely for ever: each step
 * checks `check` pages in rotation and reads the host's clock. The longest gap between two
 * steps is the longest pause the guest lived through (e.g. a migration's downtime); it is
 * reported through the control device, as is every mismatch (with its address).
 * CPU 0 does the work; other CPUs halt.
 * Parameters: bytes=SIZE (default 16M) base=ADDR (default 4M) seed=N words=1..512 (default 4)
 *             check=N pages per step (default 64)
 *             rest_us=N: microseconds the guest sleeps (in the VMM) after each step, default 0
 *             (it spins). Where a vCPU is emulated, e.g. under nested KVM in TCG, a spinning
 *             guest takes the CPU every other program there needs; a resting one still checks
 *             every page each pass. The sleep is not counted as a pause, only what it
 *             overran (e.g. a migration's downtime that began in it). */
#include "lib/runtime.h"

static uint64_t expected(uint64_t addr, uint64_t seed) {
    uint64_t x = addr ^ (seed * 0x9e3779b97f4a7c15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x | 1; /* never zero: a page that was never migrated reads as zero */
}

static void fill(uint64_t base, uint64_t pages, uint64_t spacing, uint64_t words, uint64_t seed) {
    for (uint64_t p = 0; p < pages; ++p)
        for (uint64_t w = 0; w < words; ++w) {
            uint64_t a = base + p * 4096 + w * spacing;
            *(volatile uint64_t *)(uintptr_t)a = expected(a, seed);
        }
}

static void report_mismatch(uint64_t addr, uint64_t want, uint64_t got) {
    put_str("pattern: MISMATCH at ");
    put_hex(addr);
    put_str(" expected ");
    put_hex(want);
    put_str(" found ");
    put_hex(got);
    put_str("\n");
    ctl_message("pattern: mismatch");
    ctl_command(VMMC_CMD_ERROR, addr);
}

/* Checks pages [first, first+count); returns the number of mismatching words. */
static uint64_t check(uint64_t base, uint64_t first, uint64_t count, uint64_t spacing, uint64_t words, uint64_t seed) {
    uint64_t bad = 0;
    for (uint64_t p = first; p < first + count; ++p)
        for (uint64_t w = 0; w < words; ++w) {
            uint64_t a = base + p * 4096 + w * spacing;
            uint64_t got = *(volatile uint64_t *)(uintptr_t)a;
            uint64_t want = expected(a, seed);
            if (got != want) {
                report_mismatch(a, want, got);
                ++bad;
            }
        }
    return bad;
}

void payload_main(const struct vmm_boot_info *info, uint32_t cpu) {
    if (cpu != 0) halt_forever();
    uint64_t base, bytes;
    if (!work_region(info, 16u << 20, &base, &bytes)) halt_forever();
    uint64_t seed = param_u64("seed", 1), words = param_u64("words", 4), per_step = param_u64("check", 64);
    if (words == 0 || words > 512) words = 4;
    if (per_step == 0) per_step = 64;
    uint64_t rest_ns = param_u64("rest_us", 0) * 1000;
    uint64_t pages = bytes / 4096, spacing = 4096 / words;
    put_str("pattern: filling ");
    put_size(bytes);
    put_str(" at ");
    put_hex(base);
    put_str("\n");
    fill(base, pages, spacing, words, seed);
    ctl_message("pattern: filled");
    uint64_t next = 0, passes = 0, mismatches = 0, max_gap = 0, last_report = 0, report_gap = 0;
    uint64_t prev = ctl_clock_ns();
    for (uint64_t step = 1;; ++step) {
        uint64_t n = pages - next < per_step ? pages - next : per_step;
        mismatches += check(base, next, n, spacing, words, seed);
        next += n;
        /* The gap between two clock reads spans one step of checking plus any pause the guest
         * did not see coming. Reporting (port writes, which exit to the VMM) happens after the
         * read and is timed apart, between this read and one after it: a pause that lands in
         * those exits (where a VMM pauses a vCPU, and where nested KVM under TCG spends most of
         * its time) is a gap too, as the control device sees it. */
        uint64_t now = ctl_clock_ns();
        uint64_t gap = now - prev;
        if (report_gap > gap) gap = report_gap;
        int reported = 0;
        if (next == pages) {
            next = 0;
            ++passes;
            ctl_command(VMMC_CMD_STEP, passes);
            if (mismatches == 0) ctl_command(VMMC_CMD_RESULT, passes);
            reported = 1;
        }
        if (gap > max_gap) {
            max_gap = gap;
            ctl_command(VMMC_CMD_MAX_PAUSE, max_gap);
            reported = 1;
        }
        /* Without the control device (e.g. under QEMU) there is no clock: report every pass. */
        int due = ctl_present() ? now - last_report >= 1000000000ull : next == 0;
        if (due) {
            ctl_command(VMMC_CMD_PROGRESS, step);
            put_str("pattern: pass ");
            put_u64(passes);
            put_str(", mismatches ");
            put_u64(mismatches);
            put_str(", max pause ");
            put_u64(max_gap / 1000);
            put_str(" us\n");
            last_report = now;
            reported = 1;
        }
        report_gap = 0;
        prev = now;
        if (reported) {
            prev = ctl_clock_ns();
            report_gap = prev - now;
        }
        if (rest_ns) {
            /* Only what the sleep overran is a gap (a pause that landed in it), timed from
             * where it was due to end, as the control device times it. */
            uint64_t due_at = prev + rest_ns;
            ctl_sleep_ns(rest_ns);
            prev = ctl_clock_ns();
            if (prev > due_at && prev - due_at > report_gap) report_gap = prev - due_at;
        }
    }
}
