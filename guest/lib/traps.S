/* Exception entry stubs: one per vector 0..31. Each pushes a zero error code where the CPU does
 * not push one, then the vector, and joins trap_common, which calls trap_report (traps.c) with a
 * pointer to that frame. trap_report never returns. */

    .text
    .code64
    .altmacro
.macro trap_stub v
    .align 16
trap_stub_\v:
    .if !((\v == 8) || (\v >= 10 && \v <= 14) || (\v == 17) || (\v == 21) || (\v == 29) || (\v == 30))
    push $0
    .endif
    push $\v
    jmp trap_common
.endm

    .globl trap_stubs
    .align 16
trap_stubs:
.set i, 0
.rept 32
    trap_stub %i
    .set i, i + 1
.endr

trap_common:
    mov %rsp, %rdi          /* [rsp] = vector, error code, rip, cs, rflags, rsp, ss */
    and $-16, %rsp
    call trap_report
1:  cli
    hlt
    jmp 1b
    .section .note.GNU-stack, "", @progbits
