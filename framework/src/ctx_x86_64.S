/* x86-64 System V context switch.
 * void sp__asm_ctx_swap(void **from_sp, void *to_sp)
 * Saves the callee-saved registers (rbp rbx r12-r15), MXCSR and the x87
 * control word on the current stack, stores rsp in *from_sp, switches to
 * to_sp and restores the same set from there. */
    .text
    .globl sp__asm_ctx_swap
    .type sp__asm_ctx_swap, @function
    .align 16
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
    movl (%rsp), %eax
    movzwl 4(%rsp), %ecx
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    /* Loading MXCSR or the x87 control word costs tens of cycles (fldcw
     * is microcoded): load only what differs from the values in force. */
    cmpl (%rsp), %eax
    jne 2f
1:  cmpw 4(%rsp), %cx
    jne 3f
4:  addq $8, %rsp
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
2:  ldmxcsr (%rsp)
    jmp 1b
3:  fldcw 4(%rsp)
    jmp 4b
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
