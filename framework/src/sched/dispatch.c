/* Placement of SP_ANY_WORKER tasks (sp_dispatch_t).
 *
 * Every strategy reads only relaxed per-worker counters: placement is a
 * hint, and stealing corrects a bad one. Workers the monitor flagged as
 * stuck, and extra workers asked to retire, get nothing new while another
 * worker can take it.
 */
#include "scheduler_internal.h"

#include <errno.h>

int sp_scheduler_set_dispatch(sp_scheduler_t *s, sp_dispatch_t d)
{
    if (!s || (d != SP_DISPATCH_LOCAL_FIRST && d != SP_DISPATCH_ROUND_ROBIN &&
               d != SP_DISPATCH_LEAST_LOADED))
        return -EINVAL;
    if (s->started)
        return -EBUSY;
    s->dispatch = d;
    return 0;
}

static unsigned cursor(sp_scheduler_t *s)
{
    return atomic_fetch_add_explicit(&s->rr, 1, memory_order_relaxed);
}

static int round_robin(sp_scheduler_t *s)
{
    int n = sp__sched_nlive(s);
    unsigned c = cursor(s);
    for (int k = 0; k < n; k++) {
        int i = (int)((c + (unsigned)k) % (unsigned)n);
        if (sp__sched_usable(&s->workers[i]))
            return i;
    }
    return (int)(c % (unsigned)s->nworkers); /* all stuck: queue anyway */
}

/* Queued tasks, plus one for a worker that is running something: an idle
 * worker with an empty queue wins, then the shortest queue. Ties go to the
 * first worker after a rotating start, so equal loads spread out. */
static int least_loaded(sp_scheduler_t *s)
{
    int n = sp__sched_nlive(s);
    unsigned c = cursor(s);
    int best = -1;
    size_t best_load = (size_t)-1;
    for (int k = 0; k < n; k++) {
        int i = (int)((c + (unsigned)k) % (unsigned)n);
        const sp_worker_t *w = &s->workers[i];
        if (!sp__sched_usable(w))
            continue;
        size_t load =
            atomic_load_explicit(&w->n_shared, memory_order_relaxed) +
            atomic_load_explicit(&w->n_bound, memory_order_relaxed) +
            !atomic_load_explicit(&w->idle, memory_order_relaxed);
        if (load < best_load) {
            best = i;
            best_load = load;
        }
    }
    return best >= 0 ? best : (int)(c % (unsigned)s->nworkers);
}

int sp__dispatch_pick(sp_scheduler_t *s)
{
    switch (s->dispatch) {
    case SP_DISPATCH_ROUND_ROBIN:
        return round_robin(s);
    case SP_DISPATCH_LEAST_LOADED:
        return least_loaded(s);
    default: {
        /* Local-first: the submitting worker's own queue keeps the task
         * cache-warm; idle workers steal what it cannot run soon. */
        sp_worker_t *self = sp__sched_self(s);
        if (self && sp__sched_usable(self))
            return self->index;
        return round_robin(s);
    }
    }
}
