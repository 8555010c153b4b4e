/* AArch64 (AAPCS64) context switch.
 * void sp__asm_ctx_swap(void **from_sp, void *to_sp)
 * Saves x19-x28, fp, lr, d8-d15 and FPCR on the current stack, stores sp in
 * *from_sp, switches to to_sp and restores the same set from there. */
    .text

/* Ask for the 1 KiB above \reg: the frames a parked fiber returns through. */
    .macro PREFETCH_FRAMES reg
    prfm pldl1keep, [\reg, #0]
    prfm pldl1keep, [\reg, #64]
    prfm pldl1keep, [\reg, #128]
    prfm pldl1keep, [\reg, #192]
    prfm pldl1keep, [\reg, #256]
    prfm pldl1keep, [\reg, #320]
    prfm pldl1keep, [\reg, #384]
    prfm pldl1keep, [\reg, #448]
    prfm pldl1keep, [\reg, #512]
    prfm pldl1keep, [\reg, #576]
    prfm pldl1keep, [\reg, #640]
    prfm pldl1keep, [\reg, #704]
    prfm pldl1keep, [\reg, #768]
    prfm pldl1keep, [\reg, #832]
    prfm pldl1keep, [\reg, #896]
    prfm pldl1keep, [\reg, #960]
    .endm

/* void sp__asm_ctx_prefetch(const void *fiber, const void *frames)
 * Ask for a parked fiber's two hot lines (fiber_internal.h) and its stack
 * frames, before the code that will resume it touches them one dependent
 * miss after another. */
    .globl sp__asm_ctx_prefetch
    .type sp__asm_ctx_prefetch, %function
    .align 4
sp__asm_ctx_prefetch:
    .cfi_startproc
    prfm pldl1keep, [x0]
    prfm pldl1keep, [x0, #64]
    PREFETCH_FRAMES x1
    ret
    .cfi_endproc
    .size sp__asm_ctx_prefetch, .-sp__asm_ctx_prefetch

/* void sp__asm_prefetch_lines(const void *a, const void *b)
 * Ask for two lines that will be used soon (an fd's lock and its watch;
 * the next fibers to run). */
    .globl sp__asm_prefetch_lines
    .type sp__asm_prefetch_lines, %function
    .align 4
sp__asm_prefetch_lines:
    .cfi_startproc
    prfm pstl1keep, [x0]
    prfm pstl1keep, [x1]
    ret
    .cfi_endproc
    .size sp__asm_prefetch_lines, .-sp__asm_prefetch_lines

/* void sp__asm_ctx_swap_cold(void **from_sp, void *to_sp)
 * The same switch, for resuming a fiber parked long ago: first ask for the
 * 1 KiB of its stack above to_sp, the frames it returns through, so those
 * lines arrive in parallel instead of one miss per return. */
    .globl sp__asm_ctx_swap_cold
    .type sp__asm_ctx_swap_cold, %function
    .align 4
sp__asm_ctx_swap_cold:
    .cfi_startproc
    PREFETCH_FRAMES x1
    .cfi_endproc
    .size sp__asm_ctx_swap_cold, .-sp__asm_ctx_swap_cold
    /* falls through */

    .globl sp__asm_ctx_swap
    .type sp__asm_ctx_swap, %function
sp__asm_ctx_swap:
    .cfi_startproc
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mrs x9, fpcr
    str x9, [sp, #160]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldr x9, [sp, #160]
    msr fpcr, x9
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    ret
    .cfi_endproc
    .size sp__asm_ctx_swap, .-sp__asm_ctx_swap

/* First code run on a new context: call the entry held in x19. */
    .globl sp__asm_ctx_start
    .type sp__asm_ctx_start, %function
    .align 4
sp__asm_ctx_start:
    .cfi_startproc
    .cfi_undefined x30
    mov x29, #0
    mov x30, #0
    blr x19
    brk #0
    .cfi_endproc
    .size sp__asm_ctx_start, .-sp__asm_ctx_start

    .section .note.GNU-stack,"",%progbits
