/* CPU exceptions in a payload: without an IDT any fault is a silent triple fault; with this one
 * the payload says which exception, where, and why (CR2 for page faults), on the serial console
 * and through the control device, then ends the machine with exit code 128 + vector. */
#include "runtime.h"

struct trap_frame {
    uint64_t vector, error, rip, cs, rflags, rsp, ss;
};

struct idt_gate {
    uint16_t offset_lo, selector;
    uint8_t ist, type_attr;
    uint16_t offset_mid;
    uint32_t offset_hi, reserved;
} __attribute__((packed));

extern const char trap_stubs[]; /* 32 stubs, 16 bytes apart (traps.S) */
static struct idt_gate g_idt[32] __attribute__((aligned(16)));

void traps_build(void) {
    uint16_t cs;
    __asm__ volatile("mov %%cs, %0" : "=r"(cs));
    for (int v = 0; v < 32; ++v) {
        uint64_t a = (uint64_t)(uintptr_t)(trap_stubs + 16 * v);
        g_idt[v] = (struct idt_gate){(uint16_t)a, cs, 0, 0x8e, (uint16_t)(a >> 16), (uint32_t)(a >> 32), 0};
    }
}

void traps_load(void) {
    struct {
        uint16_t limit;
        uint64_t base;
    } __attribute__((packed)) idtr = {sizeof g_idt - 1, (uint64_t)(uintptr_t)g_idt};
    __asm__ volatile("lidt %0" ::"m"(idtr));
}

static const char *const k_names[32] = {"#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM", "#DF", "#09",
                                        "#TS", "#NP", "#SS", "#GP", "#PF", "#15", "#MF", "#AC", "#MC", "#XM",
                                        "#VE", "#CP", "#22", "#23", "#24", "#25", "#26", "#27", "#HV", "#VC",
                                        "#SX", "#31"};

/* Builds "exception #PF (vector 14) at rip 0x..., error 0x..., cr2 0x..." without a printf. */
static char *append(char *p, const char *s) {
    while (*s) *p++ = *s++;
    return p;
}

static char *append_hex(char *p, uint64_t v) {
    p = append(p, "0x");
    for (int i = 0; i < 16; ++i) *p++ = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
    return p;
}

void trap_report(const struct trap_frame *f);
void trap_report(const struct trap_frame *f) {
    uint64_t cr2;
    __asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
    char line[160];
    char *p = append(line, "payload: CPU exception ");
    p = append(p, k_names[f->vector & 31]);
    p = append(p, " at rip ");
    p = append_hex(p, f->rip);
    p = append(p, ", error ");
    p = append_hex(p, f->error);
    p = append(p, ", cr2 ");
    p = append_hex(p, cr2);
    p = append(p, ", rsp ");
    p = append_hex(p, f->rsp);
    *p = 0;
    ctl_message(line);
    ctl_command(VMMC_CMD_ERROR, f->vector);
    ctl_command(VMMC_CMD_EXIT, 128 + (f->vector & 31));
}
