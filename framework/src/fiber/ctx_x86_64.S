/* x86-64 System V context switch.
 * void sp__asm_ctx_swap(void **from_sp, void *to_sp)
 * Saves the callee-saved registers (rbp rbx r12-r15), MXCSR and the x87
 * control word on the current stack, stores rsp in *from_sp, switches to
 * to_sp and restores the same set from there. */
    .text

/* Ask for the 1 KiB above \reg: the frames a parked fiber returns through. */
    .macro PREFETCH_FRAMES reg
    prefetcht0 0(\reg)
    prefetcht0 64(\reg)
    prefetcht0 128(\reg)
    prefetcht0 192(\reg)
    prefetcht0 256(\reg)
    prefetcht0 320(\reg)
    prefetcht0 384(\reg)
    prefetcht0 448(\reg)
    prefetcht0 512(\reg)
    prefetcht0 576(\reg)
    prefetcht0 640(\reg)
    prefetcht0 704(\reg)
    prefetcht0 768(\reg)
    prefetcht0 832(\reg)
    prefetcht0 896(\reg)
    prefetcht0 960(\reg)
    .endm

/* void sp__asm_ctx_prefetch(const void *fiber, const void *frames)
 * Ask for a parked fiber's two hot lines (fiber_internal.h) and its stack
 * frames, before the code that will resume it touches them one dependent
 * miss after another. */
    .globl sp__asm_ctx_prefetch
    .type sp__asm_ctx_prefetch, @function
    .align 16
sp__asm_ctx_prefetch:
    .cfi_startproc
    prefetcht0 (%rdi)
    prefetcht0 64(%rdi)
    PREFETCH_FRAMES %rsi
    ret
    .cfi_endproc
    .size sp__asm_ctx_prefetch, .-sp__asm_ctx_prefetch

/* void sp__asm_prefetch_lines(const void *a, const void *b)
 * Ask for two lines that will be used soon (an fd's lock and its watch;
 * the next fibers to run). */
    .globl sp__asm_prefetch_lines
    .type sp__asm_prefetch_lines, @function
    .align 16
sp__asm_prefetch_lines:
    .cfi_startproc
    prefetcht0 (%rdi)
    prefetcht0 (%rsi)
    ret
    .cfi_endproc
    .size sp__asm_prefetch_lines, .-sp__asm_prefetch_lines

/* void sp__asm_ctx_swap_cold(void **from_sp, void *to_sp)
 * The same switch, for resuming a fiber parked long ago: first ask for the
 * 1 KiB of its stack above to_sp, the frames it returns through. Each of
 * those returns is mispredicted after a switch and waits for its line; with
 * the lines requested together they arrive in parallel, not one by one. */
    .globl sp__asm_ctx_swap_cold
    .type sp__asm_ctx_swap_cold, @function
    .align 16
sp__asm_ctx_swap_cold:
    .cfi_startproc
    PREFETCH_FRAMES %rsi
    .cfi_endproc
    .size sp__asm_ctx_swap_cold, .-sp__asm_ctx_swap_cold
    /* falls through (the padding is executed as no-ops) */
    .p2align 4

    .globl sp__asm_ctx_swap
    .type sp__asm_ctx_swap, @function
sp__asm_ctx_swap:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    /* `ret`, not a jump through a register: between two fibers parked at
     * the same call site (a direct hand-off) the return-stack predictor is
     * then right here and on every return after; across different sites
     * it misses this once either way, and a jump would leave its stack one
     * entry off for every return that follows. */
    ret
    .cfi_endproc
    .size sp__asm_ctx_swap, .-sp__asm_ctx_swap

/* First code run on a new context: call the entry held in r12. The entry
 * never returns; ud2 makes a broken one fail loudly. */
    .globl sp__asm_ctx_start
    .type sp__asm_ctx_start, @function
    .align 16
sp__asm_ctx_start:
    .cfi_startproc
    .cfi_undefined rip
    xorl %ebp, %ebp
    callq *%r12
    ud2
    .cfi_endproc
    .size sp__asm_ctx_start, .-sp__asm_ctx_start

    .section .note.GNU-stack,"",@progbits
