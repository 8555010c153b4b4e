/* Internal: placement of SP_ANY_WORKER tasks (sp_dispatch_t), apart from
 * the scheduler. Placement sees the workers only through this view, which
 * the scheduler fills in (scheduler.c, sp__sched_init): the counters it
 * reads by address, the per-worker state through two functions, and the
 * caller's own worker as an argument (no call back for it). It does
 * not call the scheduler otherwise, so the scheduler's internals can change
 * without it.
 */
#ifndef SP_DISPATCH_H
#define SP_DISPATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "spindle/scheduler.h"

typedef struct sp__dispatcher {
    sp_dispatch_t policy;
    const int *nbase;           /* base workers: fallback when none usable */
    const _Atomic int *nlive;   /* worker slots in use */
    _Atomic unsigned *rr;       /* round-robin cursor (shared with timers) */
    const bool *watched;        /* false: no worker is ever stuck or leaving */
    const void *ctx;            /* the scheduler, for the two below */
    /* Whether new work may be placed on worker i (not stuck, not leaving). */
    bool (*usable)(const void *ctx, int i);
    /* Worker i's queued tasks, plus one if it is running something. */
    size_t (*load)(const void *ctx, int i);
} sp__dispatcher_t;

/* 0 if d is a placement policy, else -EINVAL. */
int sp__dispatch_check(sp_dispatch_t d);
/* The worker for a new SP_ANY_WORKER task; self: the calling thread's
 * worker if new work may be placed on it, else -1 (local-first uses it). */
int sp__dispatch_pick(const sp__dispatcher_t *d, int self);

#endif
