/* Placement of SP_ANY_WORKER tasks (sp_dispatch_t).
 *
 * Every strategy reads only relaxed per-worker counters: placement is a
 * hint, and stealing corrects a bad one. Workers the monitor flagged as
 * stuck, and extra workers asked to retire, get nothing new while another
 * worker can take it.
 */
#include "dispatch.h"

#include <errno.h>

int sp__dispatch_check(sp_dispatch_t d)
{
    return d == SP_DISPATCH_LOCAL_FIRST || d == SP_DISPATCH_ROUND_ROBIN ||
                   d == SP_DISPATCH_LEAST_LOADED
               ? 0
               : -EINVAL;
}

static unsigned cursor(const sp__dispatcher_t *d)
{
    return atomic_fetch_add_explicit(d->rr, 1, memory_order_relaxed);
}

static int nlive(const sp__dispatcher_t *d)
{
    return atomic_load_explicit(d->nlive, memory_order_acquire);
}

static int round_robin(const sp__dispatcher_t *d)
{
    int n = nlive(d);
    unsigned c = cursor(d);
    if (!*d->watched) /* every worker usable: no call per worker */
        return (int)(c % (unsigned)n);
    for (int k = 0; k < n; k++) {
        int i = (int)((c + (unsigned)k) % (unsigned)n);
        if (d->usable(d->ctx, i))
            return i;
    }
    return (int)(c % (unsigned)*d->nbase); /* all stuck: queue anyway */
}

/* Queued tasks, plus one for a worker that is running something: an idle
 * worker with an empty queue wins, then the shortest queue. Ties go to the
 * first worker after a rotating start, so equal loads spread out. */
static int least_loaded(const sp__dispatcher_t *d)
{
    int n = nlive(d);
    unsigned c = cursor(d);
    int best = -1;
    size_t best_load = (size_t)-1;
    for (int k = 0; k < n; k++) {
        int i = (int)((c + (unsigned)k) % (unsigned)n);
        if (*d->watched && !d->usable(d->ctx, i))
            continue;
        size_t load = d->load(d->ctx, i);
        if (load < best_load) {
            best = i;
            best_load = load;
        }
    }
    return best >= 0 ? best : (int)(c % (unsigned)*d->nbase);
}

int sp__dispatch_pick(const sp__dispatcher_t *d, int self)
{
    switch (d->policy) {
    case SP_DISPATCH_ROUND_ROBIN:
        return round_robin(d);
    case SP_DISPATCH_LEAST_LOADED:
        return least_loaded(d);
    default: {
        /* Local-first: the submitting worker's own queue keeps the task
         * cache-warm; idle workers steal what it cannot run soon. */
        return self >= 0 ? self : round_robin(d);
    }
    }
}
