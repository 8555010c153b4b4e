/* Stealing and rescue: where an idle worker finds work on others, and
 * where every worker helps one the monitor flagged as stuck. Only the idle
 * path (worker.c, next_task, once the worker's own queues are empty) and
 * the rare stuck case come here, never a task switch.
 *
 * Only tasks that never ran are stolen; a started fiber moves only off a
 * stuck worker, with migrate_stuck, and never one bound there (worker.c,
 * requeue, says why).
 */
#include "scheduler_internal.h"

#include <stdlib.h>

enum { STEAL_MAX = SP_STEAL_MAX };

/* Take up to half of v's shared queue (what a steal takes). */
static size_t take_half(sp__worker_t *v, sp__task_t *got)
{
    if (!atomic_load_explicit(&v->n_shared, memory_order_relaxed))
        return 0;
    size_t n = 0;
    pthread_mutex_lock(&v->lock);
    size_t want = (v->shared.count + 1) / 2;
    while (n < want && n < STEAL_MAX && sp__rq_pop(&v->shared, &got[n]))
        n++;
    atomic_store_explicit(&v->n_shared, v->shared.count, memory_order_relaxed);
    pthread_mutex_unlock(&v->lock);
    return n;
}

/* May a started fiber queued on a stuck worker move? Only with
 * migrate_stuck, and never one the user bound to that worker. */
static bool migratable(const sp_scheduler_t *s, const sp__task_t *t)
{
    return s->migrate_stuck && t->fiber && t->fiber->bound < 0;
}

/* Take queued work from v if the monitor flagged it as stuck: its never-
 * started tasks, and with migrate_stuck its started fibers that are not
 * bound to it (the order of what stays is kept). */
static size_t take_stuck(sp__worker_t *v, sp__task_t *got)
{
    sp_scheduler_t *s = v->s;
    if (!atomic_load_explicit(&v->stuck, memory_order_relaxed))
        return 0;
    size_t n = 0, moved = 0;
    pthread_mutex_lock(&v->lock);
    while (n < STEAL_MAX && sp__rq_pop(&v->shared, &got[n]))
        n++;
    size_t count = s->migrate_stuck ? v->bound.count : 0;
    for (size_t i = 0; i < count; i++) {
        sp__task_t t;
        sp__rq_pop(&v->bound, &t);
        if (n < STEAL_MAX && migratable(s, &t)) {
            got[n++] = t;
            moved++;
        } else if (sp__rq_push(&v->bound, &t) != 0) {
            abort(); /* cannot fail: the slot was just freed */
        }
    }
    atomic_store_explicit(&v->n_shared, v->shared.count, memory_order_relaxed);
    atomic_store_explicit(&v->n_bound, v->bound.count, memory_order_relaxed);
    pthread_mutex_unlock(&v->lock);
    if (moved)
        atomic_fetch_add(&s->m_migrated, moved);
    if (n > moved)
        atomic_fetch_add(&s->m_rescued, n - moved);
    return n;
}

/* Take work from the first other worker `take` finds some at; run the
 * first task, queue the rest here: new tasks where others may steal them,
 * started fibers in the bound queue (they live here now). Never holds two
 * locks at once. */
static bool take_from_others(sp__worker_t *w, sp__task_t *out,
                             size_t (*take)(sp__worker_t *, sp__task_t *))
{
    sp_scheduler_t *s = w->s;
    sp__task_t got[STEAL_MAX];
    int nl = sp__sched_nlive(s);
    for (int k = 1; k < nl; k++) {
        size_t n = take(&s->workers[(w->index + k) % nl], got);
        if (!n)
            continue;
        atomic_fetch_add_explicit(&w->steals, n, memory_order_relaxed);
        *out = got[0];
        /* Out of memory to queue one: the worker holds it (next_task). */
        for (size_t i = 1; i < n; i++)
            if (sp__sched_push(w, &got[i], got[i].bound) != 0)
                sp__sched_hold_back(w, &got[i]);
        return true;
    }
    return false;
}

/* An idle worker steals up to half of another worker's new tasks. */
bool sp__sched_steal(sp__worker_t *w, sp__task_t *out)
{
    return take_from_others(w, out, take_half);
}

/* A worker (busy or idle) helps the workers the monitor flagged as stuck;
 * callers check s->nstuck first, so this costs nothing otherwise. */
bool sp__sched_rescue(sp__worker_t *w, sp__task_t *out)
{
    return take_from_others(w, out, take_stuck);
}
