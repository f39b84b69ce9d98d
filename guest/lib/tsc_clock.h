/* The guest's own clock, the same under any VMM on KVM (ours, QEMU): the TSC, turned into
 * nanoseconds with the scale KVM publishes in a kvmclock page. The page is enabled once at boot,
 * read, and disabled again, so nothing writes guest memory behind the payload afterwards.
 * The scale is the host's: a migration between hosts of different TSC rates would skew it. */
#ifndef GUEST_TSC_CLOCK_H
#define GUEST_TSC_CLOCK_H

#include <stdint.h>

static inline uint64_t tsc_read(void) {
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* 1 when KVM's paravirtual clock gave the scale (call once, on one CPU); 0 when there is no
 * KVM clock (not under KVM, or a VMM that hides its CPUID leaves): tsc_ns() is then 0. */
int tsc_clock_init(void);
uint64_t tsc_ns(uint64_t ticks);  /* ticks of the TSC in nanoseconds */
uint64_t ns_tsc(uint64_t ns);     /* nanoseconds in ticks (0 without a scale) */

#endif
