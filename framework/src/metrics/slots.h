/* Internal: a block of counters with one slot per thread (metrics.h, "one
 * slot per thread"): an add is a relaxed load and store on the calling
 * thread's own cache line; a read sums the slots. For counters on hot
 * paths (the HTTP server's) and for the registry's metrics. */
#ifndef SP_METRICS_SLOTS_H
#define SP_METRICS_SLOTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle/metrics.h"

typedef struct sp__slots {
    size_t stride; /* uint64 per slot: the values, padded to a cache line */
    _Atomic uint64_t *v;
} sp__slots_t;

/* Room for n values per slot, all 0. 0 or -ENOMEM. */
int sp__slots_init(sp__slots_t *s, size_t n);
void sp__slots_free(sp__slots_t *s);
/* Value i summed over the slots. */
uint64_t sp__slots_sum(const sp__slots_t *s, size_t i);

/* The last slot is shared by threads past the first SP_METRICS_SLOTS - 1. */
enum { SP__SLOT_SHARED = SP_METRICS_SLOTS - 1 };
extern _Thread_local int sp__slot_mine; /* -1 until the thread has one */
int sp__slot_take(void);

static inline int sp__slot(void)
{
    int s = sp__slot_mine;
    return s >= 0 ? s : sp__slot_take();
}

/* Value i of slot `slot`. */
static inline _Atomic uint64_t *sp__slots_at(const sp__slots_t *s, int slot, size_t i)
{
    return &s->v[(size_t)slot * s->stride + i];
}

/* The calling thread's values in s, and whether other threads share them:
 * look them up once for several adds. */
static inline _Atomic uint64_t *sp__slots_mine(const sp__slots_t *s, bool *shared)
{
    int slot = sp__slot();
    *shared = slot == SP__SLOT_SHARED;
    return sp__slots_at(s, slot, 0);
}

/* Add n to c, one of the calling thread's values (sp__slots_mine). */
static inline void sp__slot_add(_Atomic uint64_t *c, uint64_t n, bool shared)
{
    if (shared)
        atomic_fetch_add_explicit(c, n, memory_order_relaxed);
    else
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                              memory_order_relaxed);
}

static inline void sp__slots_add(const sp__slots_t *s, size_t i, uint64_t n)
{
    bool shared;
    _Atomic uint64_t *mine = sp__slots_mine(s, &shared);
    sp__slot_add(mine + i, n, shared);
}

#endif
