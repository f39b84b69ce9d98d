/* idle: does nothing but say it is alive. CPU 0 sleeps (in the VMM, through the control device)
 * and prints a tick every `tick_ms` (default 1000); other CPUs halt.
 * Parameters: tick_ms=N
 *             fault=N: after tick N, read a non-canonical address (a #GP), to show how a payload's
 *             CPU exception is reported */
#include "lib/runtime.h"

void payload_main(const struct vmm_boot_info *info, uint32_t cpu) {
    if (cpu != 0) halt_forever();
    uint64_t tick_ms = param_u64("tick_ms", 1000);
    uint64_t fault = param_u64("fault", 0);
    put_str("idle: running on ");
    put_u64(info->cpu_count);
    put_str(" cpu(s)\n");
    for (uint64_t tick = 1;; ++tick) {
        ctl_sleep_ns(tick_ms * 1000000ull);
        ctl_command(VMMC_CMD_STEP, tick);
        ctl_command(VMMC_CMD_PROGRESS, tick);
        put_str("idle: tick ");
        put_u64(tick);
        put_str("\n");
        if (tick == fault) (void)*(volatile uint64_t *)(uintptr_t)0x8000000000000000ull;
    }
}
