/* The generic waiter (scheduler_internal.h, sp__waiter_t): a fiber's wait
 * for one of several wakers, robust against stray wakes. It parks and
 * wakes through the scheduler's public calls (sp_park, sp_wake), and on a
 * poll's own thread claims the fiber for the worker to run at once
 * (sp__waiter_deliver_here).
 */
#include "scheduler_internal.h"

void sp__waiter_init(sp__waiter_t *w)
{
    w->fiber = sp_fiber_current();
    w->result = 0;
    atomic_init(&w->promised, 0);
    atomic_init(&w->delivered, 0);
    w->sole = false;
}

void sp__waiter_init_sole(sp__waiter_t *w)
{
    sp__waiter_init(w);
    w->sole = true;
}

void sp__waiter_promise(sp__waiter_t *w, int result)
{
    if (w->sole) { /* the only writer: no locked add */
        w->result = result;
        atomic_store_explicit(&w->promised, 1, memory_order_relaxed);
        return;
    }
    if (atomic_fetch_add(&w->promised, 1) == 0)
        w->result = result;
}

/* Publishes everything the waker wrote: the waiter reads it once it sees
 * delivered catch up with promised. */
static void mark_delivered(sp__waiter_t *w)
{
    if (w->sole)
        atomic_store_explicit(&w->delivered, 1, memory_order_release);
    else
        atomic_fetch_add(&w->delivered, 1);
}

/* True on the thread of the worker f runs on: f cannot run meanwhile. */
static bool on_home_worker(const struct sp_fiber *f)
{
    int target = f->bound >= 0 ? f->bound : f->last_worker;
    return target >= 0 && &f->sched->workers[target] == sp__thread()->worker;
}

void sp__waiter_deliver(sp__waiter_t *w, bool wake)
{
    struct sp_fiber *f = w->fiber;
    if (wake && on_home_worker(f)) { /* no pins: f cannot run before we are done */
        mark_delivered(w);
        sp_wake(f);
        return;
    }
    if (wake) /* the fiber may return and finish once we mark delivery */
        atomic_fetch_add(&f->pins, 1);
    mark_delivered(w); /* last touch of w */
    if (wake) {
        sp_wake(f);
        atomic_fetch_sub(&f->pins, 1);
    }
}

struct sp_fiber *sp__waiter_deliver_here(sp__waiter_t *w)
{
    struct sp_fiber *f = w->fiber;
    /* No pins: f runs only on its worker, this thread, busy here; if it
     * belongs elsewhere, f is not touched after it is queued. */
    mark_delivered(w);
    if (!sp__sched_wake_claim(f))
        return NULL;
    if (on_home_worker(f))
        return f;
    sp__sched_requeue(f->sched, f);
    return NULL;
}

void sp__waiter_wait(sp__waiter_t *w)
{
    while (!atomic_load(&w->delivered)) {
        if (atomic_load(&w->promised))
            sp_yield(); /* a waker is between its promise and delivery */
        else
            sp_park();
    }
}

int sp__waiter_settle(sp__waiter_t *w)
{
    while (atomic_load(&w->delivered) != atomic_load(&w->promised))
        sp_yield();
    return w->result;
}
