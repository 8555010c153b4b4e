/* ucontext backend: portable and slow (swapcontext saves the signal mask
 * with a system call); kept as the fallback and as a benchmark baseline. */
#include "context.h"

#include <stdlib.h>

void sp__uc_ctx_make(sp__uc_ctx_t *c, void *stack_lo, size_t size,
                     sp_ctx_entry_fn entry)
{
    if (getcontext(&c->uc) != 0)
        abort(); /* cannot fail on Linux with a valid pointer */
    c->uc.uc_stack.ss_sp = stack_lo;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}

void sp__uc_ctx_swap(sp__uc_ctx_t *from, sp__uc_ctx_t *to)
{
    if (swapcontext(&from->uc, &to->uc) != 0)
        abort();
}

/* The registers live in the context itself, not on its stack. Read as
 * the context may run: not for the sanitizers. */
__attribute__((no_sanitize("address", "thread")))
bool sp__uc_ctx_frame(const sp__uc_ctx_t *c, uintptr_t lo, uintptr_t hi,
                      uintptr_t *fp, uintptr_t *pc)
{
    (void)lo, (void)hi;
#if defined(__x86_64__)
    *fp = (uintptr_t)c->uc.uc_mcontext.gregs[REG_RBP];
    *pc = (uintptr_t)c->uc.uc_mcontext.gregs[REG_RIP];
    return true;
#elif defined(__aarch64__)
    *fp = (uintptr_t)c->uc.uc_mcontext.regs[29];
    *pc = (uintptr_t)c->uc.uc_mcontext.pc;
    return true;
#else
    (void)c, (void)fp, (void)pc;
    return false;
#endif
}
