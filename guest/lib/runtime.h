/* The payloads' freestanding runtime: port I/O, serial text, the control device, parameters.
 * Everything here is cheap per call on purpose: on a slow /dev/kvm each port access is an exit. */
#ifndef GUEST_RUNTIME_H
#define GUEST_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/devices/control_abi.h"
#include "vmm/machine/boot_abi.h"

/* Each payload defines this; it runs on every vCPU the VMM started. */
void payload_main(const struct vmm_boot_info *info, uint32_t cpu);

static inline void outb(uint16_t port, uint8_t v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
static inline void outl(uint16_t port, uint32_t v) { __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(port)); }
static inline uint32_t inl(uint16_t port) {
    uint32_t v;
    __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}
static inline void cpu_relax(void) { __asm__ volatile("pause"); }
static inline void halt_forever(void) {
    for (;;) __asm__ volatile("cli; hlt");
}

/* CPU exceptions (traps.c): cpu 0 builds the IDT once, every CPU loads it. A fault is reported
 * (vector, rip, error code, cr2) and ends the machine with exit code 128 + vector. */
void traps_build(void);
void traps_load(void);

/* Serial console (COM1). */
void put_str(const char *s);
void put_u64(uint64_t v);
void put_hex(uint64_t v);
void put_size(uint64_t bytes); /* "64 MiB" */

/* Control device; every call is a no-op (clock returns 0) when it is absent (e.g. under QEMU)
 * or the command line says ctl=0. */
int ctl_present(void);
void ctl_command(uint32_t cmd, uint64_t arg);
uint64_t ctl_clock_ns(void);
void ctl_sleep_ns(uint64_t ns);
void ctl_message(const char *s); /* one line; also echoed to the serial console */

/* Parameters from the boot command line ("bytes=64M stride=4096"); sizes take k/m/g. */
uint64_t param_u64(const char *name, uint64_t fallback);

/* The work region [base, base+bytes) from the base= and bytes= parameters, clipped to the RAM
 * block that holds base. Returns 0 and prints why when there is none. */
int work_region(const struct vmm_boot_info *info, uint64_t default_bytes, uint64_t *base, uint64_t *bytes);

#endif
