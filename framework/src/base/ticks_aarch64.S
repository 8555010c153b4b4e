/* uint64_t sp__cpu_ticks(void): the virtual counter (base/clock.h's
 * sp__ticks), here with the other machine code rather than as inline
 * assembly in C. */
    .text
    .globl sp__cpu_ticks
    .hidden sp__cpu_ticks
    .type sp__cpu_ticks, %function
sp__cpu_ticks:
    .cfi_startproc
    mrs x0, cntvct_el0
    ret
    .cfi_endproc
    .size sp__cpu_ticks, .-sp__cpu_ticks

    .section .note.GNU-stack,"",%progbits
