/* The timer API (timer.h) on the IOManager's per-worker heaps
 * (timer_heap.c): a timer goes to the calling worker's heap, or in turn to
 * each worker's from outside; the owner is woken when a timer added from
 * elsewhere comes first. */
#include <errno.h>
#include <stdatomic.h>

#include "iomanager_internal.h"
#include "timer_internal.h"

static sp_iomanager_t *resolve(sp_iomanager_t *io)
{
    return io ? io : sp_iomanager_current();
}

int sp_timer_add(sp_iomanager_t *io, uint64_t delay_us, sp_timer_fn fn,
                 void *arg, unsigned flags, sp_token_t *alive,
                 sp_timer_id_t *id)
{
    io = resolve(io);
    if (!io || !fn || (flags & ~(unsigned)SP_TIMER_RECURRING) ||
        ((flags & SP_TIMER_RECURRING) && delay_us == 0))
        return -EINVAL;
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    sp__worker_t *self = sp__sched_self(s);
    int worker = self ? self->index
                      : (int)(atomic_fetch_add(&s->rr, 1) % (unsigned)s->nworkers);
    sp__timer_heap_t *h = sp__iom_timer_heap(io, worker);
    bool first;
    int rc = sp__timer_heap_add(h, delay_us * 1000, fn, arg, flags & SP_TIMER_RECURRING,
                                alive, id, &first);
    if (rc < 0)
        return rc;
    if (first && !self)
        sp__iom_kick(io, worker);
    return 0;
}

/* The heap owning id; NULL for an id that cannot be ours. */
static sp__timer_heap_t *owner_of(sp_iomanager_t *io, sp_timer_id_t id)
{
    io = resolve(io);
    if (!io || !id)
        return NULL;
    /* Extra workers' heaps too: an extra retires only with an empty heap,
     * and the heap stays allocated, so a stale id still meets a live heap
     * and is -ENOENT. */
    return sp__iom_timer_heap(io, sp__timer_id_worker(id));
}

int sp_timer_cancel(sp_iomanager_t *io, sp_timer_id_t id)
{
    sp__timer_heap_t *h = owner_of(io, id);
    return h ? sp__timer_heap_cancel(h, id) : -ENOENT;
}

static int retime(sp_iomanager_t *io, sp_timer_id_t id, bool set_period,
                  uint64_t period_ns, bool from_now)
{
    io = resolve(io);
    sp__timer_heap_t *h = owner_of(io, id);
    bool first;
    int rc = h ? sp__timer_heap_retime(h, id, set_period, period_ns, from_now, &first)
               : -ENOENT;
    if (rc < 0)
        return rc;
    sp__worker_t *self = sp__sched_self(sp_iomanager_scheduler(io));
    if (first && (!self || self->index != h->worker))
        sp__iom_kick(io, h->worker);
    return 0;
}

int sp_timer_refresh(sp_iomanager_t *io, sp_timer_id_t id)
{
    return retime(io, id, false, 0, true);
}

int sp_timer_reset(sp_iomanager_t *io, sp_timer_id_t id, uint64_t delay_us,
                   bool from_now)
{
    return retime(io, id, true, delay_us * 1000, from_now);
}

static void wake_sleeper(void *waiter)
{
    sp__waiter_promise(waiter, 0);
    sp__waiter_deliver(waiter, true);
}

int sp_sleep_us(uint64_t usec)
{
    sp_iomanager_t *io = sp_iomanager_current();
    if (!io || !sp_fiber_current())
        return -EPERM;
    sp__worker_t *self = sp__sched_self(sp_iomanager_scheduler(io));
    sp__timer_heap_t *h = sp__iom_timer_heap(io, self->index);
    sp__waiter_t w;
    sp__waiter_init(&w);
    w.cancel = sp__waiter_cancel_promise; /* an interrupt ends it early */
    w.kind = SP__WAIT_SLEEP;
    sp_timer_id_t tid;
    int rc = sp__timer_add_inline(h, usec * 1000, wake_sleeper, &w, &tid);
    if (rc < 0)
        return rc;
    sp__waiter_wait(&w);
    /* Fails only once the timer has fired (on this thread: it is done). */
    sp_timer_cancel(io, tid);
    return sp__waiter_settle(&w);
}
