/* Internal: fiber stacks. A stack is one region [lo, lo + total): a guard
 * region at the bottom that faults on any access, then usable memory that
 * the kernel commits page by page on first touch (the top page, which every
 * fiber writes at once, is committed ahead for a whole slab). Regions are carved from
 * large mappings and recycled through a pool (a per-thread cache in front
 * of a global list), so creating a fiber after warm-up makes no syscall. */
#ifndef SP_STACK_H
#define SP_STACK_H

#include <stddef.h>

typedef struct sp__stack {
    char *lo;     /* start of the whole region (guard included) */
    size_t total; /* guard + usable bytes */
    size_t guard; /* bytes at lo that fault */
} sp__stack_t;

/* Get a region with at least `usable` bytes above the guard.
 * 0 or -ENOMEM. */
int sp__stack_get(sp__stack_t *st, size_t usable);
/* Give a region back to the pool. */
void sp__stack_put(const sp__stack_t *st);
/* Bytes from `top` down to the lowest page of the usable region the
 * kernel holds committed (resident): how deep the stack has been used. A
 * pooled stack keeps the pages its earlier users committed. 0 if the
 * kernel cannot say. */
size_t sp__stack_used(const sp__stack_t *st, const char *top);
/* The guard size used for every stack. */
size_t sp__stack_guard_size(void);

#endif
