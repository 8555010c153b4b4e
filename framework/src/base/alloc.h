/* Internal: the allocator calls of the paths that reserve memory ahead of
 * a hot path (run queues, timer and callback records) or must cope without
 * it (a worker's list of fibers its poll woke), with a fault-injection
 * switch for tests: sp__alloc_fail_after(n) lets n more allocations
 * through and fails every later one with ENOMEM, until
 * sp__alloc_fail_after(-1) turns it off. Off, each call costs a relaxed
 * load and a compare over the libc call. */
#ifndef SP_ALLOC_H
#define SP_ALLOC_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

/* Allocations left before failures start; negative: never fail. */
extern _Atomic long sp__alloc_budget;

void sp__alloc_fail_after(long n);

/* True if this allocation must fail (errno is then ENOMEM). */
static inline bool sp__alloc_refused(void)
{
    long b = atomic_load_explicit(&sp__alloc_budget, memory_order_relaxed);
    if (b < 0)
        return false;
    for (;;) {
        if (b < 0)
            return false;
        if (b == 0) {
            errno = ENOMEM;
            return true;
        }
        if (atomic_compare_exchange_weak(&sp__alloc_budget, &b, b - 1))
            return false;
    }
}

static inline void *sp__malloc(size_t n)
{
    return sp__alloc_refused() ? NULL : malloc(n);
}

static inline void *sp__realloc(void *p, size_t n)
{
    return sp__alloc_refused() ? NULL : realloc(p, n);
}

#endif
