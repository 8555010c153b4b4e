/* The user's park/wake token, interruption and deadline scopes, on top of
 * the scheduler's own park (worker.c) and the generic waiter (waiter.c),
 * which ends a wait at its fiber's deadline.
 *
 * sp_park() is a wait like any other (a published waiter), so an
 * interrupt ends it too. Its token, f->uwake, is the user's alone: the
 * framework's waits (sleep, fd, mutex, channel...) park with sp__park()
 * and never take it, so a wake that comes during one of them is still
 * there for the next sp_park(). */
#include <errno.h>

#include "scheduler_internal.h"
#include "spindle/task.h"

/* A fiber of a scheduler that has not finished: the one thing wakes and
 * interrupts may touch. */
static int check_live(const struct sp_fiber *f)
{
    if (!f || !f->sched)
        return -EINVAL;
    return sp_fiber_state(f) == SP_FIBER_DONE ? -ESRCH : 0;
}

int sp_park(void)
{
    sp__thread_t *t = sp__thread();
    struct sp_fiber *f = t->current;
    if (f == &t->root || !f->sched || !t->worker)
        return -EPERM;
    if (atomic_exchange(&f->uwake, 0))
        return 0; /* woken before it parked */
    int rc = sp__fiber_take_interrupt(f);
    if (rc)
        return rc;
    sp__waiter_t w;
    sp__waiter_init(&w);
    w.park = true;
    w.kind = SP__WAIT_PARK;
    w.cancel = sp__waiter_cancel_promise;
    sp__waiter_wait(&w);
    rc = sp__waiter_settle(&w);
    if (rc == 0) /* the wake that ended it; wakes until now are merged */
        atomic_store(&f->uwake, 0);
    return rc;
}

int sp_wake(sp_fiber_t *f)
{
    int rc = check_live(f);
    if (rc < 0)
        return rc;
    /* Published before looking for the park: see waiter.c. */
    atomic_store(&f->uwake, 1);
    sp__fiber_end_wait(f, true, 0);
    return 0;
}

int sp_fiber_interrupt(sp_fiber_t *f, int err)
{
    if (err <= 0)
        return -EINVAL;
    int rc = check_live(f);
    if (rc < 0)
        return rc;
    atomic_store(&f->intr, err);
    sp__fiber_deliver_interrupt(f);
    return 0;
}

int sp_deadline_push(sp_deadline_t *scope, uint64_t abs_ns)
{
    sp__thread_t *t = sp__thread();
    struct sp_fiber *f = t->current;
    if (!scope || !abs_ns)
        return -EINVAL;
    if (f == &t->root || !f->sched)
        return -EPERM;
    scope->prev_ns = f->deadline_ns;
    if (!f->deadline_ns || abs_ns < f->deadline_ns)
        f->deadline_ns = abs_ns; /* an inner scope never extends an outer one */
    return 0;
}

void sp_deadline_pop(sp_deadline_t *scope)
{
    sp__thread()->current->deadline_ns = scope->prev_ns;
}

uint64_t sp_deadline_current(void)
{
    return sp__thread()->current->deadline_ns;
}
