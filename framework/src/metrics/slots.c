/* Per-thread counter slots (slots.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slots.h"

enum { LINE = 64 / sizeof(uint64_t) };

_Thread_local int sp__slot_mine = -1;
static atomic_int next_slot;

int sp__slot_take(void)
{
    int n = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    sp__slot_mine = n < SP__SLOT_SHARED ? n : SP__SLOT_SHARED;
    return sp__slot_mine;
}

int sp__slots_init(sp__slots_t *s, size_t n)
{
    s->stride = (n + LINE - 1) / LINE * LINE;
    size_t bytes = SP_METRICS_SLOTS * s->stride * sizeof(uint64_t);
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes))
        return -ENOMEM;
    memset(p, 0, bytes);
    s->v = p;
    return 0;
}

void sp__slots_free(sp__slots_t *s)
{
    free((void *)s->v);
    s->v = NULL;
}

uint64_t sp__slots_sum(const sp__slots_t *s, size_t i)
{
    uint64_t sum = 0;
    for (int slot = 0; slot < SP_METRICS_SLOTS; slot++)
        sum += atomic_load_explicit(sp__slots_at(s, slot, i), memory_order_relaxed);
    return sum;
}
