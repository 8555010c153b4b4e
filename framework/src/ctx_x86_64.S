/* x86-64 System V context switch.
 * void sp__asm_ctx_swap(void **from_sp, void *to_sp)
 * Saves the callee-saved registers (rbp rbx r12-r15), MXCSR and the x87
 * control word on the current stack, stores rsp in *from_sp, switches to
 * to_sp and restores the same set from there. */
    .text

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
    prefetcht0 0(%rsi)
    prefetcht0 64(%rsi)
    prefetcht0 128(%rsi)
    prefetcht0 192(%rsi)
    prefetcht0 256(%rsi)
    prefetcht0 320(%rsi)
    prefetcht0 384(%rsi)
    prefetcht0 448(%rsi)
    prefetcht0 512(%rsi)
    prefetcht0 576(%rsi)
    prefetcht0 640(%rsi)
    prefetcht0 704(%rsi)
    prefetcht0 768(%rsi)
    prefetcht0 832(%rsi)
    prefetcht0 896(%rsi)
    prefetcht0 960(%rsi)
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
    /* Not `ret`: the return-stack predictor would guess the call site of
     * the context we left and miss on every switch. */
    popq %r8
    jmp *%r8
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
