#include "tsc_clock.h"

/* KVM's paravirtual CPUID leaves and the kvmclock MSRs (Documentation/virt/kvm/x86/msr.rst). */
#define KVM_CPUID_SIGNATURE 0x40000000u
#define KVM_CPUID_FEATURES 0x40000001u
#define KVM_FEATURE_CLOCKSOURCE (1u << 0)
#define KVM_FEATURE_CLOCKSOURCE2 (1u << 3)
#define MSR_KVM_SYSTEM_TIME 0x12u
#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01u

/* pvclock_vcpu_time_info: what KVM writes at the address given to the MSR. */
struct pvclock {
    volatile uint32_t version; /* odd while KVM updates it */
    uint32_t pad0;
    volatile uint64_t tsc_timestamp, system_time;
    volatile uint32_t mul;
    volatile int8_t shift;
    volatile uint8_t flags;
    uint8_t pad[2];
} __attribute__((packed, aligned(32)));

static struct pvclock g_page;
static uint32_t g_mul;
static int8_t g_shift;

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d) {
    __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0));
}
static void wrmsr(uint32_t msr, uint64_t v) {
    __asm__ volatile("wrmsr" ::"c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)) : "memory");
}

/* The MSR that publishes the clock, or 0 when KVM does not offer one. */
static uint32_t clock_msr(void) {
    uint32_t a, b, c, d;
    cpuid(KVM_CPUID_SIGNATURE, &a, &b, &c, &d);
    if (b != 0x4b4d564b || c != 0x564b4d56 || d != 0x4d || a < KVM_CPUID_FEATURES) return 0; /* "KVMKVMKVM" */
    cpuid(KVM_CPUID_FEATURES, &a, &b, &c, &d);
    if (a & KVM_FEATURE_CLOCKSOURCE2) return MSR_KVM_SYSTEM_TIME_NEW;
    return (a & KVM_FEATURE_CLOCKSOURCE) ? MSR_KVM_SYSTEM_TIME : 0;
}

int tsc_clock_init(void) {
    uint32_t msr = clock_msr();
    if (msr == 0) return 0;
    wrmsr(msr, (uint64_t)(uintptr_t)&g_page | 1); /* identity-mapped: the address is physical */
    for (int tries = 0; tries < 1000000 && g_mul == 0; ++tries) {
        uint32_t v = g_page.version;
        __asm__ volatile("" ::: "memory");
        uint32_t mul = g_page.mul;
        int8_t shift = g_page.shift;
        __asm__ volatile("" ::: "memory");
        if (v != 0 && (v & 1) == 0 && v == g_page.version && mul != 0) {
            g_shift = shift;
            g_mul = mul;
        }
    }
    wrmsr(msr, 0);
    return g_mul != 0;
}

uint64_t tsc_ns(uint64_t ticks) {
    if (g_shift >= 0) ticks <<= g_shift;
    else ticks >>= -g_shift;
    return (uint64_t)(((unsigned __int128)ticks * g_mul) >> 32);
}

uint64_t ns_tsc(uint64_t ns) {
    if (g_mul == 0) return 0;
    uint64_t lo = 0, hi = 1;
    while (tsc_ns(hi) < ns && hi < (1ull << 62)) hi <<= 1; /* no 128-bit division here: bisect */
    while (lo + 1 < hi) {
        uint64_t t = lo + (hi - lo) / 2;
        if (tsc_ns(t) < ns) lo = t;
        else hi = t;
    }
    return hi;
}
