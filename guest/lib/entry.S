/* Payload entry points.
 *   entry64  - where the vmm starts every vCPU (long mode; rdi = boot info, rsi = cpu index)
 *   entry32  - where a multiboot loader starts the boot CPU (32-bit protected mode, paging off;
 *              eax = 0x2BADB002, ebx = multiboot info); it enters long mode itself.
 */
#define MB_MAGIC 0x1BADB002
#define MB_FLAGS 0x00010002 /* bit 1: memory info, bit 16: load addresses below */
#define STACK_SIZE 16384
#define MAX_CPUS 16

    .section .multiboot, "a"
    .align 4
mb_header:
    .long MB_MAGIC
    .long MB_FLAGS
    .long -(MB_MAGIC + MB_FLAGS)
    .long mb_header      /* header_addr */
    .long _image_start   /* load_addr */
    .long _load_end      /* load_end_addr */
    .long _bss_end       /* bss_end_addr */
    .long entry32        /* entry_addr */

    .text
    .code64
    .globl entry64
entry64:
    cmp $MAX_CPUS, %rsi
    jae park
    mov %rsi, %rax
    inc %rax
    imul $STACK_SIZE, %rax
    lea stacks(%rip), %rsp
    add %rax, %rsp
    xor %rbp, %rbp
    call payload_start
park:
    cli
    hlt
    jmp park

    .code32
entry32:
    cli
    mov %ebx, mb_info_ptr
    mov $boot_stack_top, %esp
    /* Identity-map 4 GiB with 2 MiB pages: PML4[0] -> PDPT, PDPT[0..3] -> PD0..PD3. */
    mov $mb_pdpt, %eax
    or $3, %eax
    mov %eax, mb_pml4
    xor %ecx, %ecx
1:  mov %ecx, %eax
    shl $12, %eax
    add $mb_pd, %eax
    or $3, %eax
    mov %eax, mb_pdpt(,%ecx,8)
    inc %ecx
    cmp $4, %ecx
    jb 1b
    xor %ecx, %ecx
2:  mov %ecx, %eax
    shl $21, %eax
    or $0x83, %eax
    mov %eax, mb_pd(,%ecx,8)
    mov %ecx, %eax
    shr $11, %eax
    mov %eax, mb_pd+4(,%ecx,8)
    inc %ecx
    cmp $2048, %ecx
    jb 2b
    mov %cr4, %eax
    or $0x20, %eax          /* PAE */
    mov %eax, %cr4
    mov $mb_pml4, %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx   /* EFER.LME */
    rdmsr
    or $0x100, %eax
    wrmsr
    mov %cr0, %eax
    or $0x80000001, %eax    /* PG | PE */
    mov %eax, %cr0
    lgdt mb_gdt_desc
    ljmp $0x08, $mb_long

    .code64
mb_long:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %ax, %fs
    mov %ax, %gs
    mov mb_info_ptr(%rip), %edi
    call multiboot_boot_info   /* returns a struct vmm_boot_info * */
    mov %rax, %rdi
    xor %esi, %esi
    jmp entry64

    .section .rodata
    .align 8
mb_gdt:
    .quad 0
    .quad 0x00af9b000000ffff
    .quad 0x00cf93000000ffff
mb_gdt_desc:
    .word mb_gdt_desc - mb_gdt - 1
    .long mb_gdt

    .bss
    .align 4096
mb_pml4: .skip 4096
mb_pdpt: .skip 4096
mb_pd: .skip 4 * 4096
    .align 16
    .skip 4096
boot_stack_top:
    .globl stacks
stacks: .skip STACK_SIZE * MAX_CPUS
mb_info_ptr: .skip 8
    .section .note.GNU-stack, "", @progbits
