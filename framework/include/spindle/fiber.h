/* spindle fibers: stackful coroutines with their own context switch.
 *
 * Error convention (all of spindle): functions returning int give 0 (or a
 * non-negative value) on success and a negative errno on failure;
 * constructors return NULL and set errno.
 *
 * A fiber is resumed by some context (a thread's own stack or another fiber)
 * and runs until it yields or its function returns; control then goes back
 * to the context that resumed it (asymmetric coroutines). errno is saved per
 * fiber: a value set before a switch is seen again after it. A stack overflow
 * hits a guard region and stops the process with "fiber N (name) overflowed
 * its stack" (what is caught and what is not: docs/guide.md, "Stack
 * safety").
 */
#ifndef SPINDLE_FIBER_H
#define SPINDLE_FIBER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_fiber sp_fiber_t;
typedef void (*sp_fiber_fn)(void *arg);

typedef enum sp_fiber_state {
    SP_FIBER_READY,     /* created or reset, never run yet */
    SP_FIBER_RUNNING,   /* executing on some thread right now */
    SP_FIBER_SUSPENDED, /* yielded; may be resumed */
    SP_FIBER_DONE       /* its function returned */
} sp_fiber_state_t;

/* Default stack reservation: virtual size, committed page by page on use. */
#define SP_FIBER_DEFAULT_STACK (128u * 1024u)

/* Create a fiber that will run fn(arg) on a stack of at least stack_size
 * bytes (0 = SP_FIBER_DEFAULT_STACK). name may be NULL; it is copied
 * (truncated to 31 bytes). Returns NULL and sets errno (ENOMEM) on failure.
 * The fiber does not run until sp_fiber_resume(). */
sp_fiber_t *sp_fiber_create(sp_fiber_fn fn, void *arg, size_t stack_size,
                            const char *name);

/* Free a fiber that is not running (READY, SUSPENDED or DONE). Destroying a
 * SUSPENDED fiber abandons its stack without unwinding it. NULL is a no-op. */
void sp_fiber_destroy(sp_fiber_t *f);

/* Switch from the current context into f until f yields or finishes.
 * Returns 0, -EINVAL if f is NULL, RUNNING or DONE. */
int sp_fiber_resume(sp_fiber_t *f);

/* Switch from the current fiber back to the context that resumed it.
 * Returns -EPERM when called outside a fiber, 0 after being resumed. */
int sp_fiber_yield(void);

/* The fiber running on this thread, or NULL on a thread's own stack. */
sp_fiber_t *sp_fiber_current(void);

/* Unique, increasing, never 0. */
uint64_t sp_fiber_id(const sp_fiber_t *f);
const char *sp_fiber_name(const sp_fiber_t *f);
sp_fiber_state_t sp_fiber_state(const sp_fiber_t *f);

/* How many bytes of f's stack have been used at most, page-granular, to
 * size stacks: measured on demand (one mincore() call per 1 MiB of stack)
 * from the pages the kernel has committed. A stack reused from the pool
 * keeps the pages its earlier fibers committed, so the figure is the
 * deepest use of f and of the fibers that ran on its stack before (an
 * upper bound for f alone). Pages swapped out are not counted. 0 if f is
 * NULL. */
size_t sp_fiber_stack_used(const sp_fiber_t *f);

/* Name of the context backend compiled in: "asm-x86_64", "asm-aarch64" or
 * "ucontext". */
const char *sp_fiber_backend(void);

#ifdef __cplusplus
}
#endif
#endif
