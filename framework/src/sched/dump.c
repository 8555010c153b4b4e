/* sp_fibers_dump (debug.h): a snapshot of the fiber registry, grouped.
 *
 * The registry lock is held only while fibers are copied into records
 * (their backtraces included); stack use, peer addresses and symbols are
 * looked up after it is released. Running fibers are not walked: their
 * saved context is stale. Any other fiber may resume while its frames are
 * read: the walks (dump_unwind.c, or dump_fpwalk.c without libunwind) read
 * only that fiber's stack, mapped for as long as the fiber is registered
 * (the lock keeps it registered), and a garbled one ends a walk, it never
 * faults.
 *
 * Times: each wait stores sp__ticks(), a few instructions, not a clock
 * call; the dump converts ticks to seconds with a rate measured from the
 * first dump's start (the reference) to now. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "dump.h"
#include "scheduler_internal.h"
#include "spindle/debug.h"

static uint64_t ref_ticks, ref_ns;
static pthread_once_t ref_once = PTHREAD_ONCE_INIT;

static void take_reference(void)
{
    ref_ticks = sp__ticks();
    ref_ns = sp__now_ns();
}

static double ticks_per_ns(uint64_t *now)
{
    uint64_t ns;
    do { /* over at least 1 ms (the first dump waits for it), for a rate
          * good to 0.1% */
        *now = sp__ticks();
        ns = sp__now_ns();
    } while (ns - ref_ns < 1000000);
    return (double)(*now - ref_ticks) / (double)(ns - ref_ns);
}

/* Whether f is listed, and as what. */
SP__RACY_READER static bool classify(const struct sp_fiber *f,
                                 unsigned char *state)
{
    int st = atomic_load_explicit(&f->state, memory_order_relaxed);
    if (st == SP_FIBER_DONE || (f->pooled && st == SP_FIBER_READY))
        return false; /* finished, or a pooled fiber waiting for a task */
    int park = atomic_load_explicit(&f->park, memory_order_relaxed);
    if (f->sched && park == SP_PARK_PARKED)
        *state = SP__DUMP_PARKED;
    else if (st == SP_FIBER_RUNNING)
        *state = SP__DUMP_RUNNING;
    else
        *state = f->sched ? SP__DUMP_RUNNABLE : SP__DUMP_SUSPENDED;
    return true;
}

SP__RACY_READER static bool snapshot(const struct sp_fiber *f, sp__dump_rec_t *r,
                                 unsigned flags)
{
    if (!classify(f, &r->state))
        return false;
    r->id = f->id;
    memcpy(r->name, f->name, sizeof r->name);
    r->name[sizeof r->name - 1] = '\0';
    bool parked = r->state == SP__DUMP_PARKED;
    r->kind = parked ? f->wait_kind : SP__WAIT_NONE;
    r->fd = parked ? f->wait_fd : -1;
    r->worker = f->bound >= 0 ? f->bound : f->last_worker;
    r->born = f->born_ticks;
    r->since = parked ? f->wait_ticks : 0;
    r->stack = f->stack;
    r->top = (const char *)f;
    r->nframes = 0;
    if (r->state != SP__DUMP_RUNNING && !(flags & SP_DUMP_NO_STACK) &&
        f->stack.lo)
        sp__dump_walk(f, r);
    return true;
}

static size_t registry_count(void)
{
    size_t n = 0;
    sp__spin_lock(&sp__fiber_registry_lock);
    for (sp__link_t *l = sp__fiber_registry.head; l; l = l->next)
        n++;
    sp__spin_unlock(&sp__fiber_registry_lock);
    return n;
}

/* Fill recs (room for cap); the number filled. */
static size_t take(sp__dump_rec_t *recs, size_t cap, unsigned flags)
{
    size_t n = 0;
    sp__spin_lock(&sp__fiber_registry_lock);
    for (sp__link_t *l = sp__fiber_registry.head; l && n < cap; l = l->next) {
        const struct sp_fiber *f = sp__list_entry(l, struct sp_fiber, reg_link);
        if (snapshot(f, &recs[n], flags))
            n++;
    }
    sp__spin_unlock(&sp__fiber_registry_lock);
    return n;
}

/* Group order: state, wait kind, backtrace; then id within a group. */
static int same_group(const sp__dump_rec_t *a, const sp__dump_rec_t *b)
{
    if (a->state != b->state)
        return a->state < b->state ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->nframes != b->nframes)
        return a->nframes < b->nframes ? -1 : 1;
    return memcmp(a->pc, b->pc, a->nframes * sizeof a->pc[0]);
}

static int rec_order(const void *pa, const void *pb)
{
    const sp__dump_rec_t *a = *(sp__dump_rec_t *const *)pa;
    const sp__dump_rec_t *b = *(sp__dump_rec_t *const *)pb;
    int c = same_group(a, b);
    if (c)
        return c;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Largest groups first, as Go's dump does; ties by lowest id. */
static int group_order(const void *pa, const void *pb)
{
    const sp__dump_group_t *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->recs[0]->id < b->recs[0]->id ? -1 : 1;
}

static int group(sp__dump_t *d, sp__dump_rec_t **order)
{
    qsort(order, d->nrecs, sizeof *order, rec_order);
    d->groups = malloc(sizeof *d->groups * (d->nrecs ? d->nrecs : 1));
    if (!d->groups)
        return -ENOMEM;
    d->ngroups = 0;
    for (size_t i = 0; i < d->nrecs; i++) {
        d->by_state[order[i]->state]++;
        if (d->ngroups &&
            same_group(d->groups[d->ngroups - 1].recs[0], order[i]) == 0) {
            d->groups[d->ngroups - 1].count++;
            continue;
        }
        d->groups[d->ngroups++] = (sp__dump_group_t){&order[i], 1};
    }
    qsort(d->groups, d->ngroups, sizeof *d->groups, group_order);
    return 0;
}

int sp_fibers_dump(FILE *out, unsigned flags)
{
    /* Room for fibers created between the count and the copy; any beyond
     * that are left out of this dump. */
    pthread_once(&ref_once, take_reference);
    size_t cap = registry_count() + 256;
    sp__dump_rec_t *recs = malloc(sizeof *recs * cap);
    sp__dump_rec_t **order = malloc(sizeof *order * cap);
    sp__dump_t d = {0};
    int rc = -ENOMEM;
    if (recs && order) {
        d.nrecs = take(recs, cap, flags);
        d.ticks_per_ns = ticks_per_ns(&d.now);
        for (size_t i = 0; i < d.nrecs; i++)
            order[i] = &recs[i];
        rc = group(&d, order);
    }
    if (rc == 0)
        rc = flags & SP_DUMP_JSON ? sp__dump_print_json(out, &d)
                                  : sp__dump_print_text(out, &d);
    free(d.groups);
    free(order);
    free(recs);
    return rc < 0 ? rc : (int)d.nrecs;
}

int sp_fibers_count(sp_fibers_count_t *out)
{
    *out = (sp_fibers_count_t){0};
    size_t cap = registry_count() + 16, n = 0; /* a few more may come */
    sp__stack_t *stacks = malloc(cap * sizeof *stacks);
    const char **tops = malloc(cap * sizeof *tops);
    if (!stacks || !tops) {
        free(stacks);
        free(tops);
        return -ENOMEM;
    }
    size_t *by_state[SP__DUMP_STATES] = {&out->running, &out->runnable,
                                         &out->parked, &out->suspended};
    sp__spin_lock(&sp__fiber_registry_lock);
    for (sp__link_t *l = sp__fiber_registry.head; l && n < cap; l = l->next) {
        const struct sp_fiber *f = sp__list_entry(l, struct sp_fiber, reg_link);
        unsigned char state;
        if (!classify(f, &state))
            continue;
        (*by_state[state])++;
        stacks[n] = f->stack;
        tops[n++] = (const char *)f;
    }
    sp__spin_unlock(&sp__fiber_registry_lock);
    for (size_t i = 0; i < n; i++) /* mapped while listed, and after: pooled */
        if (stacks[i].lo)
            out->stack_bytes += sp__stack_used(&stacks[i], tops[i]);
    free(stacks);
    free(tops);
    return 0;
}
