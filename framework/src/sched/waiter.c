/* The generic waiter (scheduler_internal.h, sp__waiter_t): a fiber's wait
 * for one of several wakers, robust against stray wakes. It parks and
 * wakes through the scheduler's own calls (sp__park, sp__wake), and on a
 * polling worker's thread hands the fiber straight to that worker's list
 * of fibers to run after the poll (sp__waiter_deliver_on).
 *
 * Ending a wait early (sp_wake for a park, sp_fiber_interrupt for any):
 * while it waits, a fiber publishes its waiter in f->cur_wait (bit 0: an
 * sp_park). Whoever takes it from there (an exchange to 0) calls its
 * cancel function, counted in f->wait_busy until it has promised (or
 * found the wait over); the fiber takes it back the same way when the
 * wait ends, and if someone else took it first, waits for wait_busy to
 * drop before it settles the waiter. The
 * fiber checks for a pending interrupt (or park wake) after publishing,
 * the other side publishes its flag before looking at cur_wait: one of
 * the two always sees the other.
 *
 * Those are two store-then-load pairs on the fiber's side (publish, then
 * look for an interrupt; withdraw, then look for takers), each needing a
 * store-load fence. For every wait but an sp_park the fiber makes them
 * with plain stores and a compiler fence, and a taker that may run beside
 * it (another thread) makes every thread fence first (base/fence.h): an
 * interrupt is rare, a wait is per message. sp_park keeps the locked
 * instructions, since its taker, sp_wake, is as common as it is.
 */
#include <errno.h>

#include "base/clock.h"
#include "base/fence.h"
#include "scheduler_internal.h"

void sp__waiter_init(sp__waiter_t *w)
{
    sp__waiter_init_for(w, sp_fiber_current(), false);
}

void sp__waiter_init_sole(sp__waiter_t *w)
{
    sp__waiter_init_for(w, sp_fiber_current(), true);
}

int sp__waiter_cancel_promise(sp__waiter_t *w, int result)
{
    return sp__waiter_promise(w, result) ? SP_CANCEL_DECIDED : SP_CANCEL_PROMISED;
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

/* The worker f runs on (bound or homed), or NULL before it first ran. */
static sp__worker_t *home_of(const struct sp_fiber *f)
{
    int target = f->bound >= 0 ? f->bound : f->last_worker;
    return target >= 0 ? &f->sched->workers[target] : NULL;
}

/* A wake of f from a thread other than its worker's: f may run, return
 * and finish as soon as we mark delivery, so it is pinned until done. */
static void deliver_pinned(sp__waiter_t *w, struct sp_fiber *f)
{
    atomic_fetch_add(&f->pins, 1);
    mark_delivered(w); /* last touch of w */
    sp__wake(f);
    atomic_fetch_sub(&f->pins, 1);
}

void sp__waiter_deliver(sp__waiter_t *w, bool wake)
{
    sp__worker_t *self = wake ? sp__thread()->worker : NULL;
    if (self)
        sp__waiter_deliver_on(w, self);
    else if (wake)
        deliver_pinned(w, w->fiber);
    else
        mark_delivered(w);
}

void sp__waiter_deliver_on(sp__waiter_t *w, sp__worker_t *self)
{
    struct sp_fiber *f = w->fiber;
    if (home_of(f) != self) {
        deliver_pinned(w, f);
        return;
    }
    /* No pins: f runs only on self, this thread, busy here. */
    mark_delivered(w);
    if (sp__sched_wake_claim(f))
        sp__sched_requeue_home(self, f);
}

/* Whether the calling thread may run at the same time as f, which then
 * has to be made to fence (see the top): not f itself, nor f's worker's
 * thread when f can run nowhere else (no migrate_stuck). */
static bool runs_beside(const struct sp_fiber *f)
{
    const sp__thread_t *t = sp__thread_peek();
    if (t && t->current == f)
        return false;
    return f->sched->migrate_stuck || !t || t->worker != (void *)home_of(f);
}

/* f's published wait, for a taker (counted in wait_busy, or holding
 * back the interrupt it is about to deliver). An sp_park's is published
 * and withdrawn with locked instructions; any other, or none, may be a
 * plain store still in f's thread's store buffer: make that thread fence
 * first (see the top), then look again. */
static uintptr_t load_wait(struct sp_fiber *f)
{
    uintptr_t v = atomic_load(&f->cur_wait);
    if ((v & 1) || !sp__fence_asym() || !runs_beside(f))
        return v;
    sp__fence_heavy();
    return atomic_load(&f->cur_wait);
}

bool sp__fiber_end_wait(struct sp_fiber *f, bool park_only, int result)
{
    sp__waiter_t *w = NULL;
    int r = SP_CANCEL_LATE;
    atomic_fetch_add(&f->wait_busy, 1);
    /* sp_wake takes only an sp_park's wait, which needs no fence. */
    uintptr_t v = park_only ? atomic_load(&f->cur_wait) : load_wait(f);
    while (v && (!park_only || (v & 1))) {
        /* A wake ends a park only while its token is there: if an
         * sp_park took the token on its way in, the wake must not end the
         * park that fiber starts next as well (two returns for one wake). */
        if (park_only && !atomic_load(&f->uwake))
            break;
        if (atomic_compare_exchange_weak(&f->cur_wait, &v, 0)) {
            w = (sp__waiter_t *)(v & ~(uintptr_t)1);
            r = w->cancel(w, result);
            break;
        }
    }
    /* Once promised, the waiter stays until delivered (its settle waits
     * for that): the fiber need not wait for the wake-up that follows,
     * which may tickle another thread. */
    atomic_fetch_sub(&f->wait_busy, 1);
    if (r != SP_CANCEL_LATE)
        sp__waiter_deliver(w, true);
    return r == SP_CANCEL_DECIDED;
}

int sp__fiber_take_interrupt(struct sp_fiber *f)
{
    int e = atomic_load_explicit(&f->intr, memory_order_relaxed);
    return e && atomic_compare_exchange_strong(&f->intr, &e, 0) ? -e : 0;
}

void sp__fiber_deliver_interrupt(struct sp_fiber *f)
{
    for (;;) {
        /* Take the interrupt before ending a wait with it: once the wait
         * ends, the fiber may start another, which must not see it. */
        int e = atomic_load(&f->intr);
        if (!e || !atomic_compare_exchange_strong(&f->intr, &e, 0))
            return; /* none, or another sender took it */
        if (sp__fiber_end_wait(f, false, -e))
            return;
        /* No wait took it: keep it for the next one (unless a newer one
         * came, which its sender delivers). The fiber may have published
         * a wait meanwhile and looked while we held it: look again. */
        int none = 0;
        if (!atomic_compare_exchange_strong(&f->intr, &none, e) || !load_wait(f))
            return;
    }
}

/* Just published w: end it at once for an interrupt (or a park's wake)
 * that came before. */
static void early_end(struct sp_fiber *f, sp__waiter_t *w)
{
    if (atomic_load(&f->intr))
        sp__fiber_deliver_interrupt(f);
    else if (w->park && atomic_load(&f->uwake))
        sp__fiber_end_wait(f, true, 0);
}

static void deadline_passed(void *f)
{
    sp__fiber_end_wait(f, false, -ETIMEDOUT);
}

/* The fiber's deadline scope (task.h) over a published wait: end it now
 * if the deadline has passed, else arm a timer on this worker that ends
 * it then (its id in *tid; 0: none). */
static void arm_deadline(struct sp_fiber *f, uint64_t *tid)
{
    uint64_t now = sp__now_ns();
    sp_scheduler_t *s = f->sched;
    int rc = 0;
    if (now >= f->deadline_ns)
        rc = -ETIMEDOUT;
    else if (s->ops.timer_add)
        rc = s->ops.timer_add(s, f->deadline_ns - now, deadline_passed, f, tid);
    if (rc < 0)
        sp__fiber_end_wait(f, false, rc);
}

void sp__waiter_wait(sp__waiter_t *w)
{
    struct sp_fiber *f = w->fiber;
    uint64_t tid = 0;
    f->wait_kind = w->kind;
    f->wait_fd = w->fd;
    f->wait_ticks = sp__ticks();
    /* Publish and withdraw with plain stores (see the top), but an
     * sp_park's. */
    bool light = !w->park && sp__fence_asym();
    if (w->cancel) {
        if (light) {
            atomic_store_explicit(&f->cur_wait, (uintptr_t)w, memory_order_release);
            sp__fence_light();
        } else {
            atomic_store(&f->cur_wait, (uintptr_t)w | w->park);
        }
        early_end(f, w);
        if (f->deadline_ns)
            arm_deadline(f, &tid);
    }
    while (!atomic_load(&w->delivered)) {
        if (atomic_load(&w->promised))
            sp_yield(); /* a waker is between its promise and delivery */
        else
            sp__park();
    }
    /* It runs on this thread: once cancel fails, it has completed. */
    if (tid)
        f->sched->ops.timer_cancel(f->sched, tid);
    /* Taken by someone else: they may still be in w->cancel. Withdrawn
     * lightly, any taker still counted may be in it. */
    if (!w->cancel)
        return;
    if (light) {
        atomic_store_explicit(&f->cur_wait, 0, memory_order_release);
        sp__fence_light();
    } else if (atomic_exchange(&f->cur_wait, 0)) {
        return;
    }
    while (atomic_load(&f->wait_busy))
        sp_yield();
}
