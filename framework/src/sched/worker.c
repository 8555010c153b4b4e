/* The worker side of the N:M scheduler: its queues and wake-ups, the
 * worker loop that runs tasks, and the per-switch hot path (yield, park,
 * wake, direct hand-off). Everything a task switch runs is in this file, so
 * the compiler inlines it as one unit; stealing (steal.c) and the public
 * lifecycle (scheduler.c) are off that path.
 *
 * Queues: each worker has two FIFO queues under one lock, `shared` (new
 * tasks, which other workers may steal) and `bound` (tasks bound to it, and
 * fibers that already ran there: see requeue()), and a third without a lock,
 * `local`, for fibers the worker woke itself. Entries carry a per-worker
 * sequence number so the owner runs them in submission order across all
 * three. An idle worker steals up to half of another worker's shared queue.
 * Fibers woken on the worker's own thread while it polls for events (by
 * the poll's fd events, its timers, its inbox) do not queue at all: they go
 * on one list, `woken`, and run right after the poll, in the order they
 * were collected (see poll_events).
 *
 * Sleeping without lost wake-ups: a worker about to sleep sets idle=1, issues
 * a full fence, then looks at every queue once more; a submitter pushes,
 * issues a full fence, then looks at the idle flags. One of the two always
 * sees the other. A submitter claims an idle worker by CAS 1->0 before
 * tickling it, so each sleeping worker is woken at most once per claim, and
 * nobody is tickled while no worker is idle.
 */
#include "base/alloc.h"
#include "base/clock.h"
#include "scheduler_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* ---- queues and wake-ups ------------------------------------------------ */

sp__worker_t *sp__sched_self(const sp_scheduler_t *s)
{
    sp__worker_t *w = sp__thread()->worker;
    return w && w->s == s ? w : NULL;
}

bool sp__sched_claim(sp__worker_t *w)
{
    int one = 1;
    return atomic_load_explicit(&w->idle, memory_order_relaxed) == 1 &&
           atomic_compare_exchange_strong(&w->idle, &one, 0);
}

/* After a push to `target`: wake it if it sleeps; for a stealable task,
 * otherwise wake some other sleeping worker to steal it. A worker never
 * tickles itself: if it pushed from inside its own idle (an event
 * callback), it looks at its queues as soon as that returns. A fiber
 * queued on a stuck worker is stealable when migrate_stuck is on. */
static void notify(sp_scheduler_t *s, int target, bool bound)
{
    sp__worker_t *self = sp__sched_self(s);
    sp__worker_t *t = &s->workers[target];
    if (bound && t == self)
        return; /* our own work: we look at our queues next */
    atomic_thread_fence(memory_order_seq_cst);
    if (t != self && sp__sched_claim(t)) {
        s->ops.tickle(s, target);
        return;
    }
    if (bound && !(s->migrate_stuck && atomic_load(&t->stuck)))
        return;
    int n = sp__sched_nlive(s);
    for (int k = 1; k < n; k++) {
        sp__worker_t *w = &s->workers[(target + k) % n];
        if (w != self && sp__sched_claim(w)) {
            s->ops.tickle(s, w->index);
            return;
        }
    }
}

/* The next number for an entry of w's queues. The owner's unlocked pushes
 * and other threads' locked ones may race here and take the same number:
 * a tie only leaves their relative order open, and the plain load and
 * store cost no locked instruction on the owner's wake path. */
static uint64_t next_seq(sp__worker_t *w)
{
    uint64_t v = atomic_load_explicit(&w->seq, memory_order_relaxed);
    atomic_store_explicit(&w->seq, v + 1, memory_order_relaxed);
    return v;
}

/* A push with a reservation takes its promised slot (sp__rsv_use_t); any
 * other keeps every promised slot free, growing the queue if need be. */
static int push(sp__worker_t *w, const sp__task_t *task, bool bound,
                sp__rsv_use_t rsv)
{
    sp__task_t t = *task;
    pthread_mutex_lock(&w->lock);
    if (w->gone) { /* an extra worker that has left */
        pthread_mutex_unlock(&w->lock);
        return -EAGAIN;
    }
    t.seq = next_seq(w);
    t.bound = bound;
    sp__run_queue_t *q = bound ? &w->bound : &w->shared;
    int rc = rsv == SP_RSV_NONE ? sp__sched_room(w, q, bound) : 0;
    if (rc == 0)
        rc = sp__rq_push(q, &t);
    if (rc == 0) {
        if (rsv == SP_RSV_SPEND)
            w->rsv_slots[bound]--;
        atomic_store_explicit(bound ? &w->n_bound : &w->n_shared, q->count,
                              memory_order_relaxed);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static int enqueue(sp_scheduler_t *s, int target, const sp__task_t *task,
                   bool bound, sp__rsv_use_t rsv)
{
    int rc = push(&s->workers[target], task, bound, rsv);
    if (rc == -EAGAIN) { /* only SP_ANY_WORKER work is placed on extras */
        if (rsv == SP_RSV_SPEND) /* not used there after all */
            sp__sched_unreserve(&s->workers[target], bound);
        rc = push(&s->workers[target = target % s->nworkers], task, bound,
                  SP_RSV_NONE);
    }
    if (rc == 0)
        notify(s, target, bound);
    return rc;
}

/* Pop the oldest task of either queue of w. */
static bool take_local(sp__worker_t *w, sp__task_t *out)
{
    const sp__task_t *l = sp__rq_peek(&w->local);
    if (!atomic_load_explicit(&w->n_shared, memory_order_relaxed) &&
        !atomic_load_explicit(&w->n_bound, memory_order_relaxed))
        return l && sp__rq_pop(&w->local, out);
    pthread_mutex_lock(&w->lock);
    const sp__task_t *a = sp__rq_peek(&w->shared);
    const sp__task_t *b = sp__rq_peek(&w->bound);
    bool ok = false;
    if (l && (!a || l->seq < a->seq) && (!b || l->seq < b->seq)) {
        ok = sp__rq_pop(&w->local, out);
    } else if (a && (!b || a->seq < b->seq)) {
        ok = sp__rq_pop(&w->shared, out);
        atomic_store_explicit(&w->n_shared, w->shared.count,
                              memory_order_relaxed);
    } else if (b) {
        ok = sp__rq_pop(&w->bound, out);
        atomic_store_explicit(&w->n_bound, w->bound.count,
                              memory_order_relaxed);
    }
    pthread_mutex_unlock(&w->lock);
    return ok;
}

/* For steal.c and scheduler.c; the static versions stay inlinable here. */
int sp__sched_push(sp__worker_t *w, const sp__task_t *task, bool bound)
{
    return push(w, task, bound, SP_RSV_NONE);
}

int sp__sched_enqueue(sp_scheduler_t *s, int target, const sp__task_t *task,
                      bool bound, sp__rsv_use_t rsv)
{
    return enqueue(s, target, task, bound, rsv);
}

static bool work_visible(const sp_scheduler_t *s, const sp__worker_t *w)
{
    if (w->local.count || atomic_load(&w->n_bound))
        return true;
    int nl = sp__sched_nlive(s);
    for (int i = 0; i < nl; i++) {
        const sp__worker_t *v = &s->workers[i];
        if (atomic_load(&v->n_shared))
            return true;
        if (s->migrate_stuck && atomic_load(&v->stuck) &&
            atomic_load(&v->n_bound))
            return true;
    }
    return false;
}

static void run_task(sp__worker_t *w, const sp__task_t *task);

/* The next fiber this worker's poll woke, in the order collected; it asks
 * for the next two fibers' lines (a batch from a busy poll runs long after
 * the poll asked for them). */
static struct sp_fiber *next_woken(sp__worker_t *w)
{
    struct sp_fiber **v = w->woken;
    unsigned i = w->woken_next++, n = w->nwoken;
    if (i + 1 < n)
        sp__prefetch_lines(v[i + 1], v[i + 2 < n ? i + 2 : i + 1]);
    return v[i];
}

/* Run the fibers this worker's poll woke. Each that parks again hands the
 * thread straight to the next (switch_out), so this loop sees the batch's
 * first fiber and the ends of chains. Nothing is collected meanwhile: the
 * fibers' own wake-ups go through the queues. */
static void run_woken(sp__worker_t *w)
{
    while (w->woken_next < w->nwoken)
        run_task(w, &(sp__task_t){.fiber = next_woken(w)});
    w->nwoken = w->woken_next = 0;
}

void sp__sched_reverse_collected(sp__worker_t *w, unsigned from)
{
    if (w->nwoken - from < 2)
        return; /* nothing to turn round (and maybe no list yet) */
    struct sp_fiber **lo = w->woken + from, **hi = w->woken + w->nwoken;
    while (hi > lo + 1) {
        struct sp_fiber *f = *lo;
        *lo++ = *--hi;
        *hi = f;
    }
}

/* The extension's idle or tick: fibers woken on this worker meanwhile are
 * collected, to run once it returns (run_woken). No task runs inside. */
static void poll_events(sp__worker_t *w, void (*poll)(sp_scheduler_t *, int))
{
    sp__sched_bump(&w->polls, 1);
    w->collecting = true;
    poll(w->s, w->index);
    w->collecting = false;
}

static void go_idle(sp__worker_t *w)
{
    sp_scheduler_t *s = w->s;
    atomic_store(&w->idle, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (!work_visible(s, w) && !sp__sched_stopped(s)) {
        uint64_t t0 = sp__now_ns(); /* the time blocked, for the stats */
        poll_events(w, s->ops.idle);
        sp__sched_bump(&w->idle_ns, sp__now_ns() - t0);
    }
    atomic_store(&w->idle, 0);
    run_woken(w);
}

/* ---- running tasks ------------------------------------------------------ */

static struct sp_fiber *task_fiber(sp__worker_t *w, const sp__task_t *task)
{
    struct sp_fiber *f;
    if (w->nspare) {
        f = w->spare[--w->nspare];
        f->id = sp__fiber_next_id(w->fibers);
        sp__fiber_reset(f, task->fn, task->arg);
    } else {
        f = sp_fiber_create(task->fn, task->arg, 0, "task");
        if (!f)
            return NULL;
        f->pooled = true;
    }
    f->sched = w->s;
    f->last_worker = -1; /* not started anywhere yet */
    return f;
}

static void retire(sp__worker_t *w, struct sp_fiber *f)
{
    /* A waker may still be inside sp__wake(f) (see sp__waiter_deliver), or
     * a waker or interrupter inside sp__fiber_end_wait(f): each is a few
     * instructions from done, so wait for them before reuse. */
    while (atomic_load(&f->pins) || atomic_load(&f->wait_busy))
        sched_yield();
    sp__sched_bump(&w->tasks_run, 1);
    sp__sched_bump(&w->owned, (uint64_t)-1); /* one fewer */
    sp__sched_unreserve(w, true); /* its requeue slot (run_task) */
    sp__fiber_finished(f); /* its joiners */
    /* The scheduler's reference; while a handle holds another, the last
     * sp_fiber_unref frees f. */
    if (atomic_fetch_sub(&f->refs, 1) == 1) {
        if (f->pooled && w->nspare < sizeof w->spare / sizeof w->spare[0])
            w->spare[w->nspare++] = f;
        else
            sp_fiber_destroy(f);
    }
    sp__sched_release(w->s);
}

/* Owner thread, while its worker polls: keep a woken fiber of this worker
 * to run right after the poll (run_woken), as a callback server runs its
 * handlers. False if out of memory: the caller queues it as usual. */
static bool collect(sp__worker_t *w, struct sp_fiber *f)
{
    if (w->nwoken == w->capwoken) {
        unsigned cap = w->capwoken ? 2 * w->capwoken : 64;
        struct sp_fiber **grown = sp__realloc(w->woken, sizeof *grown * cap);
        if (!grown)
            return false;
        w->woken = grown;
        w->capwoken = cap;
    }
    w->woken[w->nwoken++] = f;
    return true;
}

/* A fiber that has run resumes on the worker it last ran on (or its bound
 * one), and waits in that worker's non-stealable queue. Only tasks that
 * never ran are stolen. Moving a started fiber to another thread is unsafe
 * for ordinary C code: compilers keep thread-local addresses (errno's
 * included, __errno_location being a const function) in registers across
 * calls such as sp_yield(), and the fiber would then read the old thread's
 * variables (libgo issue 256). `self`: the caller's worker, or NULL. */
static void requeue(sp__worker_t *self, struct sp_fiber *f)
{
    sp_scheduler_t *s = f->sched;
    int target = f->bound >= 0 ? f->bound : f->last_worker;
    sp__worker_t *w = &s->workers[target];
    if (self == w) {
        if (w->collecting && collect(w, f))
            return;
        /* Our own wake: the unlocked queue, unless the monitor may have
         * other workers take this worker's started fibers. */
        sp__task_t t = {.fiber = f, .bound = true, .seq = next_seq(w)};
        if (!s->migrate_stuck && sp__rq_push(&w->local, &t) == 0)
            return;
    }
    sp__task_t t = {.fiber = f};
    if (enqueue(s, target, &t, true, SP_RSV_KEEP) != 0)
        abort(); /* cannot fail: f reserved its slot when homed (run_task) */
}

/* Runs after f switched back to the worker: f's context is fully saved, so
 * it may now be handed to other threads. */
static void after_run(sp__worker_t *w, struct sp_fiber *f)
{
    if (atomic_load_explicit(&f->state, memory_order_acquire) == SP_FIBER_DONE) {
        retire(w, f);
        return;
    }
    if (w->parked_out == f) { /* parked as PARKED: a wake queues it */
        w->parked_out = NULL;
        return;
    }
    int p = atomic_load(&f->park);
    if (p == SP_PARK_PARKING || p == SP_PARK_WOKEN) {
        int expect = SP_PARK_PARKING;
        if (atomic_compare_exchange_strong(&f->park, &expect, SP_PARK_PARKED))
            return; /* a later sp__wake() queues it */
        atomic_store(&f->park, SP_PARK_RUNNING); /* woken while switching out */
    }
    requeue(w, f); /* sp_yield(), or a plain sp_fiber_yield() */
}

void sp__sched_requeue(sp__worker_t *self, struct sp_fiber *f)
{
    requeue(self, f);
}

/* Out of memory to start a task: keep it and retry after a pause instead
 * of dropping it or spinning. */
static void retry_later(sp__worker_t *w, const sp__task_t *task)
{
    sp__sched_hold_back(w, task);
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
}

static void run_task(sp__worker_t *w, const sp__task_t *task)
{
    struct sp_fiber *f = task->fiber;
    /* A fiber about to live here reserves the slot its wake-ups will take
     * in this worker's bound queue (requeue), so that a wake never fails. */
    if (!(f && f->last_worker == w->index) && sp__sched_reserve(w, true)) {
        retry_later(w, task);
        return;
    }
    if (!f) {
        f = task_fiber(w, task);
        if (!f) {
            sp__sched_unreserve(w, true);
            retry_later(w, task);
            return;
        }
        f->bound = task->bound ? w->index : SP_ANY_WORKER;
    }
    if (f->last_worker != w->index) { /* first run here: it lives here now */
        if (f->last_worker >= 0) { /* moved from a stuck worker */
            sp__worker_t *from = &w->s->workers[f->last_worker];
            atomic_fetch_add(&from->migrated_out, 1);
            sp__sched_unreserve(from, true);
        }
        sp__sched_bump(&w->owned, 1);
        f->last_worker = w->index;
    }
    sp__sched_bump(&w->switches, 1);
    if (w->s->monitored)
        sp__sched_publish_start(w, f);
    sp__fiber_resume_cold(w->fibers, f);
    /* Whoever switched back: f, or a fiber f handed the thread to. */
    f = w->fibers->prev;
    if (w->s->monitored) /* even: between tasks */
        atomic_store_explicit(&w->run_seq, atomic_load_explicit(&w->run_seq,
                              memory_order_relaxed) + 1, memory_order_relaxed);
    after_run(w, f);
}

static bool next_task(sp__worker_t *w, sp__task_t *task)
{
    sp_scheduler_t *s = w->s;
    bool leaving = atomic_load_explicit(&w->retiring, memory_order_relaxed);
    /* Tasks held back for lack of memory wait behind the queues; a take
     * from others may hold back up to SP_STEAL_MAX - 1 more, and the task
     * then run one: hence SP_HELD_MAX. */
    if (s->monitored && !leaving && w->nheld < SP_STEAL_MAX &&
        atomic_load_explicit(&s->nstuck, memory_order_relaxed) &&
        sp__sched_rescue(w, task))
        return true;
    if (take_local(w, task))
        return true;
    if (w->nheld) {
        *task = w->held[--w->nheld];
        return true;
    }
    return !leaving && sp__sched_steal(w, task);
}

static void worker_loop(sp__worker_t *w)
{
    sp__thread_t *t = sp__thread();
    t->worker = w;
    sp__sched_hooks_update(t);
    w->fibers = t;
    for (;;) {
        sp__task_t task;
        if (next_task(w, &task)) {
            run_task(w, &task);
            if (w->s->ops.tick && ++w->since_tick >= w->tick_every) {
                /* Poll again only once everything the last poll woke has
                 * run: those fibers have waited again by then, so their
                 * fds' readiness is news, not a repeat. */
                w->since_tick = 0;
                poll_events(w, w->s->ops.tick);
                run_woken(w);
                size_t queued = atomic_load(&w->n_shared) +
                                atomic_load(&w->n_bound) + w->local.count;
                w->tick_every = queued > SP_TICK_TASKS ? (unsigned)queued : SP_TICK_TASKS;
            }
            continue;
        }
        if (sp__sched_stopped(w->s))
            break;
        if (atomic_load(&w->retiring) && sp__sched_try_leave(w))
            break;
        go_idle(w);
    }
    while (w->nspare)
        sp_fiber_destroy(w->spare[--w->nspare]);
    free(w->woken);
    w->woken = NULL;
    w->capwoken = 0;
    if (w->s->ops.exit)
        w->s->ops.exit(w->s, w->index);
    t->worker = NULL;
    sp__sched_hooks_update(t);
}

void *sp__sched_thread_main(void *arg)
{
    sp__worker_t *w = arg;
    worker_loop(w);
    if (w->index >= w->s->nworkers) /* an extra: the monitor joins it */
        atomic_store_explicit(&w->exited, 1, memory_order_release);
    return NULL;
}

/* use_caller: worker 0's loop runs in a fiber that stop() resumes, so the
 * caller's own stack stays where stop() was called. */
void sp__sched_caller_loop(void *arg)
{
    worker_loop(arg);
}

/* The task fiber running on this thread, t, or NULL. */
static struct sp_fiber *current_task(const sp__thread_t *t)
{
    struct sp_fiber *f = t->current;
    return f != &t->root && f->sched && t->worker ? f : NULL;
}

/* ---- direct hand-off -----------------------------------------------------
 * A fiber that parks or yields while the next task in line is one this
 * worker woke itself (the rest of the last poll's batch, or its unlocked
 * queue with nothing older in the locked ones) switches straight to it
 * rather than through the worker loop: one switch instead of two, and when
 * both fibers parked through the same calls (connections of one server, a
 * channel ping-pong) the return predictor is right on the way back up.
 * The loop's share of the switch-out (after_run) then runs on the next
 * fiber's stack, once the switch is complete. Not while the monitor
 * watches (it tracks one task per run_task); from the unlocked queue, only
 * until the loop's turn to poll (every SP_TICK_TASKS tasks). */

static void finish_handoff(sp__thread_t *t, struct sp_fiber *prev)
{
    after_run(t->worker, prev);
}

/* The fiber to hand the thread to, and how to switch to it: the rest of a
 * poll's batch first (run_woken would run it next; its stack is cold),
 * then this worker's own wakes. */
static struct sp_fiber *handoff_target(sp__worker_t *w, unsigned *how)
{
    sp_scheduler_t *s = w->s;
    if (s->monitored)
        return NULL;
    if (w->woken_next < w->nwoken) {
        *how = SP_SWITCH_COLD;
        return next_woken(w);
    }
    if (!w->local.count || atomic_load_explicit(&w->n_shared, memory_order_relaxed) ||
        atomic_load_explicit(&w->n_bound, memory_order_relaxed))
        return NULL;
    if (s->ops.tick && w->since_tick + 1 >= w->tick_every)
        return NULL;
    sp__task_t t;
    if (!sp__rq_pop(&w->local, &t))
        return NULL;
    w->since_tick++;
    *how = 0;
    return t.fiber;
}

/* The current task fiber f of this thread, t, gives up the thread: to
 * the next woken or local fiber, or back to the worker loop. */
static int switch_out(sp__thread_t *t, struct sp_fiber *f)
{
    sp__worker_t *w = t->worker;
    unsigned how;
    struct sp_fiber *next = handoff_target(w, &how);
    if (!next)
        return sp__fiber_suspend(t);
    sp__sched_bump(&w->switches, 1);
    next->caller = f->caller;
    atomic_store_explicit(&next->state, SP_FIBER_RUNNING, memory_order_relaxed);
    atomic_store_explicit(&f->state, SP_FIBER_SUSPENDED, memory_order_release);
    t->after_switch = finish_handoff;
    sp__fiber_switch(t, f, next, how);
    return 0;
}

int sp_yield(void)
{
    sp__thread_t *t = sp__thread();
    struct sp_fiber *f = current_task(t);
    if (!f)
        return -EPERM;
    return switch_out(t, f);
}

int sp__park(void)
{
    /* Inline, and read before the switch only. */
    sp__thread_t *t = sp__thread_peek();
    struct sp_fiber *f = t ? current_task(t) : NULL;
    if (!f)
        return -EPERM;
    /* Straight to PARKED when only this worker may run f (see f->park):
     * after_run has no compare-and-swap to make then. */
    bool direct = !f->sched->migrate_stuck;
    int expect = SP_PARK_RUNNING;
    if (!atomic_compare_exchange_strong(&f->park, &expect,
                                        direct ? SP_PARK_PARKED : SP_PARK_PARKING)) {
        atomic_store(&f->park, SP_PARK_RUNNING); /* consume the early wake */
        return 0;
    }
    if (direct)
        ((sp__worker_t *)t->worker)->parked_out = f;
    return switch_out(t, f);
}

int sp__wake(struct sp_fiber *f)
{
    if (!f || !f->sched)
        return -EINVAL;
    if (sp__sched_wake_claim(f))
        requeue(sp__thread()->worker, f);
    return 0;
}
