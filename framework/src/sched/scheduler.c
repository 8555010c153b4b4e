/* N:M scheduler.
 *
 * Queues: each worker has two FIFO queues under one lock, `shared` (new
 * tasks, which other workers may steal) and `bound` (tasks bound to it, and
 * fibers that already ran there: see requeue()), and a third without a lock,
 * `local`, for fibers the worker woke itself. Entries carry a per-worker
 * sequence number so the owner runs them in submission order across all
 * three. An idle worker steals up to half of another worker's shared queue.
 * Fibers woken by the worker's own event poll do not queue at all: they run
 * in the event callback, or right after the poll (see poll_events).
 *
 * Sleeping without lost wake-ups: a worker about to sleep sets idle=1, issues
 * a full fence, then looks at every queue once more; a submitter pushes,
 * issues a full fence, then looks at the idle flags. One of the two always
 * sees the other. A submitter claims an idle worker by CAS 1->0 before
 * tickling it, so each sleeping worker is woken at most once per claim, and
 * nobody is tickled while no worker is idle.
 *
 * Park/wake: f->park is RUNNING, PERMIT (woken while running), PARKING
 * (switching out), WOKEN (woken while switching out) or PARKED. Only the
 * worker that finished switching the fiber out moves PARKING -> PARKED, and
 * only a wake that sees PARKED queues the fiber, so a fiber is queued exactly
 * once per park and never runs on two threads (sylar issue 24).
 *
 * Stopping: `ctl` counts live tasks (queued, running or parked) plus holds
 * from extensions; stop() sets STOPPING and the count reaching zero then sets
 * STOPPED, after which every worker exits and submissions fail.
 */
#include "scheduler_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { P_RUNNING, P_PERMIT, P_PARKING, P_WOKEN, P_PARKED };
enum { STEAL_MAX = 32 };

#define CTL_STOPPING (1ull << 62)
#define CTL_STOPPED (1ull << 63)
#define CTL_COUNT(v) ((v) & (CTL_STOPPING - 1))

/* ---- live-task accounting ---------------------------------------------- */

static void wake_all(sp_scheduler_t *s)
{
    int n = sp__sched_nlive(s);
    for (int i = 0; i < n; i++) {
        atomic_store(&s->workers[i].idle, 0);
        s->ops.tickle(s, i);
    }
}

int sp__sched_hold(sp_scheduler_t *s)
{
    uint64_t v = atomic_load(&s->ctl);
    do {
        if (v & CTL_STOPPED)
            return -ESHUTDOWN;
    } while (!atomic_compare_exchange_weak(&s->ctl, &v, v + 1));
    return 0;
}

static void try_finish(sp_scheduler_t *s, uint64_t v)
{
    if (v == CTL_STOPPING &&
        atomic_compare_exchange_strong(&s->ctl, &v, v | CTL_STOPPED))
        wake_all(s);
}

void sp__sched_release(sp_scheduler_t *s)
{
    try_finish(s, atomic_fetch_sub(&s->ctl, 1) - 1);
}

static bool stopped(const sp_scheduler_t *s)
{
    return atomic_load(&s->ctl) & CTL_STOPPED;
}

/* ---- queues and wake-ups ------------------------------------------------ */

sp_worker_t *sp__sched_self(const sp_scheduler_t *s)
{
    sp_worker_t *w = sp__thread()->worker;
    return w && w->s == s ? w : NULL;
}

bool sp__sched_claim(sp_worker_t *w)
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
    sp_worker_t *self = sp__sched_self(s);
    sp_worker_t *t = &s->workers[target];
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
        sp_worker_t *w = &s->workers[(target + k) % n];
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
static uint64_t next_seq(sp_worker_t *w)
{
    uint64_t v = atomic_load_explicit(&w->seq, memory_order_relaxed);
    atomic_store_explicit(&w->seq, v + 1, memory_order_relaxed);
    return v;
}

static int push(sp_worker_t *w, const sp_task_t *task, bool bound)
{
    sp_task_t t = *task;
    pthread_mutex_lock(&w->lock);
    if (w->gone) { /* an extra worker that has left */
        pthread_mutex_unlock(&w->lock);
        return -EAGAIN;
    }
    t.seq = next_seq(w);
    t.bound = bound;
    sp_run_queue_t *q = bound ? &w->bound : &w->shared;
    int rc = sp__rq_push(q, &t);
    if (rc == 0)
        atomic_store_explicit(bound ? &w->n_bound : &w->n_shared, q->count,
                              memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static int enqueue(sp_scheduler_t *s, int target, const sp_task_t *task,
                   bool bound)
{
    int rc = push(&s->workers[target], task, bound);
    if (rc == -EAGAIN) /* only SP_ANY_WORKER work is placed on extras */
        rc = push(&s->workers[target = target % s->nworkers], task, bound);
    if (rc == 0)
        notify(s, target, bound);
    return rc;
}

/* Pop the oldest task of either queue of w. */
static bool take_local(sp_worker_t *w, sp_task_t *out)
{
    const sp_task_t *l = sp__rq_peek(&w->local);
    if (!atomic_load_explicit(&w->n_shared, memory_order_relaxed) &&
        !atomic_load_explicit(&w->n_bound, memory_order_relaxed))
        return l && sp__rq_pop(&w->local, out);
    pthread_mutex_lock(&w->lock);
    const sp_task_t *a = sp__rq_peek(&w->shared);
    const sp_task_t *b = sp__rq_peek(&w->bound);
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

/* Take up to half of v's shared queue (what a steal takes). */
static size_t take_half(sp_worker_t *v, sp_task_t *got)
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
static bool migratable(const sp_scheduler_t *s, const sp_task_t *t)
{
    return s->migrate_stuck && t->fiber && t->fiber->bound < 0;
}

/* Take queued work from v if the monitor flagged it as stuck: its never-
 * started tasks, and with migrate_stuck its started fibers that are not
 * bound to it (the order of what stays is kept). */
static size_t take_stuck(sp_worker_t *v, sp_task_t *got)
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
        sp_task_t t;
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
static bool take_from_others(sp_worker_t *w, sp_task_t *out,
                             size_t (*take)(sp_worker_t *, sp_task_t *))
{
    sp_scheduler_t *s = w->s;
    sp_task_t got[STEAL_MAX];
    int nl = sp__sched_nlive(s);
    for (int k = 1; k < nl; k++) {
        size_t n = take(&s->workers[(w->index + k) % nl], got);
        if (!n)
            continue;
        atomic_fetch_add_explicit(&w->steals, n, memory_order_relaxed);
        *out = got[0];
        for (size_t i = 1; i < n; i++) {
            if (push(w, &got[i], got[i].bound) != 0) /* ENOMEM: no way out */
                abort();
        }
        return true;
    }
    return false;
}

/* An idle worker steals up to half of another worker's new tasks. */
static bool steal(sp_worker_t *w, sp_task_t *out)
{
    return take_from_others(w, out, take_half);
}

/* A worker (busy or idle) helps the workers the monitor flagged as stuck;
 * callers check s->nstuck first, so this costs nothing otherwise. */
static bool rescue(sp_worker_t *w, sp_task_t *out)
{
    return take_from_others(w, out, take_stuck);
}

static bool work_visible(const sp_scheduler_t *s, const sp_worker_t *w)
{
    if (w->local.count || atomic_load(&w->n_bound))
        return true;
    int nl = sp__sched_nlive(s);
    for (int i = 0; i < nl; i++) {
        const sp_worker_t *v = &s->workers[i];
        if (atomic_load(&v->n_shared))
            return true;
        if (s->migrate_stuck && atomic_load(&v->stuck) &&
            atomic_load(&v->n_bound))
            return true;
    }
    return false;
}

static void run_task(sp_worker_t *w, const sp_task_t *task);

/* Run, in wake order, the fibers collected while this worker polled. A
 * fiber that yields or is woken again meanwhile goes through the queue. */
static void run_woken(sp_worker_t *w)
{
    for (unsigned i = 0; i < w->nwoken; i++)
        run_task(w, &(sp_task_t){.fiber = w->woken[i]});
    w->nwoken = 0;
}

bool sp__sched_polling(const sp_worker_t *w)
{
    return w->collecting && !w->running;
}

void sp__sched_run_now(sp_worker_t *w, struct sp_fiber *f)
{
    run_task(w, &(sp_task_t){.fiber = f});
}

/* The extension's idle or tick: fibers its event callbacks wake on this
 * worker are collected, then run once it returns. */
static void poll_events(sp_worker_t *w, void (*poll)(sp_scheduler_t *, int))
{
    w->collecting = true;
    poll(w->s, w->index);
    w->collecting = false;
}

static void go_idle(sp_worker_t *w)
{
    sp_scheduler_t *s = w->s;
    atomic_store(&w->idle, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (!work_visible(s, w) && !stopped(s))
        poll_events(w, s->ops.idle);
    atomic_store(&w->idle, 0);
    run_woken(w);
}

static void base_idle(sp_scheduler_t *s, int worker)
{
    sp_worker_t *w = &s->workers[worker];
    pthread_mutex_lock(&w->sleep_lock);
    while (!w->signaled)
        pthread_cond_wait(&w->sleep_cond, &w->sleep_lock);
    w->signaled = false;
    pthread_mutex_unlock(&w->sleep_lock);
}

static void base_tickle(sp_scheduler_t *s, int worker)
{
    sp_worker_t *w = &s->workers[worker];
    pthread_mutex_lock(&w->sleep_lock);
    w->signaled = true;
    pthread_cond_signal(&w->sleep_cond);
    pthread_mutex_unlock(&w->sleep_lock);
}

/* ---- running tasks ------------------------------------------------------ */

/* A counter only its worker writes: a plain add, no locked instruction. */
static void bump(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static struct sp_fiber *task_fiber(sp_worker_t *w, const sp_task_t *task)
{
    struct sp_fiber *f;
    if (w->nspare) {
        f = w->spare[--w->nspare];
        f->id = sp__fiber_next_id(sp__thread());
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

static void retire(sp_worker_t *w, struct sp_fiber *f)
{
    /* A waker may still be inside sp_wake(f) (see sp__waiter_deliver): it
     * is a few instructions from done, so wait for it before reuse. */
    while (atomic_load(&f->pins))
        sched_yield();
    bump(&w->tasks_run);
    w->owned--;
    if (f->pooled && w->nspare < sizeof w->spare / sizeof w->spare[0])
        w->spare[w->nspare++] = f;
    else
        sp_fiber_destroy(f);
    sp__sched_release(w->s);
}

bool sp__fibers_push(struct sp_fiber ***v, unsigned *n, unsigned *cap,
                     struct sp_fiber *f)
{
    if (*n == *cap) {
        unsigned grow = *cap ? 2 * *cap : 64;
        struct sp_fiber **grown = realloc(*v, sizeof *grown * grow);
        if (!grown)
            return false;
        *v = grown;
        *cap = grow;
    }
    (*v)[(*n)++] = f;
    return true;
}

/* Owner thread, while its worker polls for events: keep a woken fiber of
 * this worker to run right after the poll (see go_idle), as a callback
 * server runs its handlers, instead of a trip through the locked queue.
 * False if out of memory: queue it as usual. */
static bool collect(sp_worker_t *w, struct sp_fiber *f)
{
    return sp__fibers_push(&w->woken, &w->nwoken, &w->capwoken, f);
}

/* A fiber that has run resumes on the worker it last ran on (or its bound
 * one), and waits in that worker's non-stealable queue. Only tasks that
 * never ran are stolen. Moving a started fiber to another thread is unsafe
 * for ordinary C code: compilers keep thread-local addresses (errno's
 * included, __errno_location being a const function) in registers across
 * calls such as sp_yield(), and the fiber would then read the old thread's
 * variables (libgo issue 256). */
static void requeue(sp_scheduler_t *s, struct sp_fiber *f)
{
    int target = f->bound >= 0 ? f->bound : f->last_worker;
    sp_worker_t *w = &s->workers[target];
    if (sp__thread()->worker == w) {
        if (w->collecting && collect(w, f))
            return;
        /* Our own wake: the unlocked queue, unless the monitor may have
         * other workers take this worker's started fibers. */
        sp_task_t t = {.fiber = f, .bound = true, .seq = next_seq(w)};
        if (!s->migrate_stuck && sp__rq_push(&w->local, &t) == 0)
            return;
    }
    sp_task_t t = {.fiber = f};
    if (enqueue(s, target, &t, true) != 0)
        abort(); /* out of memory while holding a live fiber */
}

/* Runs after f switched back to the worker: f's context is fully saved, so
 * it may now be handed to other threads. */
static void after_run(sp_worker_t *w, struct sp_fiber *f)
{
    if (sp_fiber_state(f) == SP_FIBER_DONE) {
        retire(w, f);
        return;
    }
    int p = atomic_load(&f->park);
    if (p == P_PARKING || p == P_WOKEN) {
        int expect = P_PARKING;
        if (atomic_compare_exchange_strong(&f->park, &expect, P_PARKED))
            return; /* a later sp_wake() queues it */
        atomic_store(&f->park, P_RUNNING); /* woken while switching out */
    }
    requeue(w->s, f); /* sp_yield(), or a plain sp_fiber_yield() */
}

static void publish_start(sp_worker_t *w, const struct sp_fiber *f);

static void run_task(sp_worker_t *w, const sp_task_t *task)
{
    struct sp_fiber *f = task->fiber;
    if (!f) {
        f = task_fiber(w, task);
        if (!f) {
            /* Out of memory for a stack: keep the task and retry after a
             * pause instead of dropping it or spinning. */
            if (push(w, task, task->bound) != 0)
                abort();
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
            return;
        }
        f->bound = task->bound ? w->index : SP_ANY_WORKER;
    }
    if (f->last_worker != w->index) { /* first run here: it lives here now */
        if (f->last_worker >= 0) /* moved from a stuck worker */
            atomic_fetch_add(&w->s->workers[f->last_worker].migrated_out, 1);
        w->owned++;
        f->last_worker = w->index;
    }
    bump(&w->switches);
    if (w->s->monitored)
        publish_start(w, f);
    w->running = true;
    sp__fiber_resume_cold(f);
    /* Whoever switched back: f, or a fiber f handed the thread to. */
    f = sp__thread()->prev;
    w->running = false;
    if (w->s->monitored) /* even: between tasks */
        atomic_store_explicit(&w->run_seq, atomic_load_explicit(&w->run_seq,
                              memory_order_relaxed) + 1, memory_order_relaxed);
    after_run(w, f);
}

/* Tell the monitor which fiber runs (owner-only relaxed stores). The name
 * is copied because the monitor must not touch a fiber that may finish
 * and be freed meanwhile; function tasks are all called "task". The seq
 * is bumped last (release) so a sampler that sees it also sees the rest. */
static void publish_start(sp_worker_t *w, const struct sp_fiber *f)
{
    /* Orders these stores after the previous task's end (seqlock). */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&w->run_fid, f->id, memory_order_relaxed);
    if (f->pooled) {
        atomic_store_explicit(&w->run_name[0], 0, memory_order_relaxed);
    } else {
        uint64_t words[4];
        memcpy(words, f->name, sizeof words);
        for (int i = 0; i < 4; i++)
            atomic_store_explicit(&w->run_name[i], words[i],
                                  memory_order_relaxed);
    }
    atomic_store_explicit(&w->run_seq, atomic_load_explicit(&w->run_seq,
                          memory_order_relaxed) + 1, memory_order_release);
}

/* An extra worker asked to retire leaves once it has nothing queued, no
 * started fiber lives here (a parked one will come back to this worker)
 * and the extension does not need it (an IOManager: armed timers and
 * watches). `gone` is set under the lock, so no push lands here
 * afterwards. */
static bool try_leave(sp_worker_t *w)
{
    sp_scheduler_t *s = w->s;
    if (w->owned - atomic_load(&w->migrated_out) > 0)
        return false;
    if (s->ops.may_leave && !s->ops.may_leave(s, w->index))
        return false;
    pthread_mutex_lock(&w->lock);
    bool empty = !w->shared.count && !w->bound.count && !w->local.count;
    if (empty)
        w->gone = true;
    pthread_mutex_unlock(&w->lock);
    return empty;
}

static bool next_task(sp_worker_t *w, sp_task_t *task)
{
    sp_scheduler_t *s = w->s;
    bool leaving = atomic_load_explicit(&w->retiring, memory_order_relaxed);
    if (s->monitored && !leaving &&
        atomic_load_explicit(&s->nstuck, memory_order_relaxed) &&
        rescue(w, task))
        return true;
    return take_local(w, task) || (!leaving && steal(w, task));
}

static void worker_loop(sp_worker_t *w)
{
    sp_thread_t *t = sp__thread();
    t->worker = w;
    for (;;) {
        sp_task_t task;
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
        if (stopped(w->s))
            break;
        if (atomic_load(&w->retiring) && try_leave(w))
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
}

static void *thread_main(void *arg)
{
    sp_worker_t *w = arg;
    worker_loop(w);
    if (w->index >= w->s->nworkers) /* an extra: the monitor joins it */
        atomic_store_explicit(&w->exited, 1, memory_order_release);
    return NULL;
}

int sp__sched_spawn(sp_scheduler_t *s, int i)
{
    if (stopped(s))
        return -ESHUTDOWN;
    if (s->ops.spawn) {
        int rc = s->ops.spawn(s, i);
        if (rc < 0)
            return rc;
    }
    sp_worker_t *w = &s->workers[i];
    w->gone = false;
    w->owned = 0;
    w->signaled = false;
    atomic_store(&w->migrated_out, 0);
    atomic_store(&w->retiring, 0);
    atomic_store(&w->exited, 0);
    atomic_store(&w->idle, 0);
    atomic_store(&s->nlive, i + 1); /* visible before the thread runs */
    int rc = pthread_create(&w->thread, NULL, thread_main, w);
    if (rc != 0) {
        atomic_store(&s->nlive, i);
        return -rc;
    }
    w->thread_live = true;
    return 0;
}

/* use_caller: worker 0's loop runs in a fiber that stop() resumes, so the
 * caller's own stack stays where stop() was called. */
static void caller_loop(void *arg)
{
    worker_loop(arg);
}

/* ---- public API --------------------------------------------------------- */

/* Allocate `cap` worker slots (the base workers plus room for extras, so
 * growing never reallocates under running threads). */
static int alloc_workers(sp_scheduler_t *s, int cap)
{
    s->workers = aligned_alloc(64, sizeof(sp_worker_t) * (size_t)cap);
    if (!s->workers)
        return -ENOMEM;
    s->cap = cap;
    memset(s->workers, 0, sizeof(sp_worker_t) * (size_t)cap);
    for (int i = 0; i < cap; i++) {
        sp_worker_t *w = &s->workers[i];
        pthread_mutex_init(&w->lock, NULL);
        pthread_mutex_init(&w->sleep_lock, NULL);
        pthread_cond_init(&w->sleep_cond, NULL);
        sp__rq_init(&w->shared);
        sp__rq_init(&w->bound);
        sp__rq_init(&w->local);
        w->s = s;
        w->index = i;
        w->tick_every = SP_TICK_TASKS;
    }
    if (s->use_caller) {
        sp_worker_t *w0 = &s->workers[0];
        w0->loop_fiber = sp_fiber_create(caller_loop, w0, 0, s->name);
        if (!w0->loop_fiber) {
            int err = -errno;
            sp__sched_fini(s);
            return err;
        }
    }
    return 0;
}

int sp__sched_init(sp_scheduler_t *s, const char *name, int threads,
                   bool use_caller)
{
    if (threads < 1 || threads > 1024)
        return -EINVAL;
    memset(s, 0, sizeof *s);
    s->ops.idle = base_idle;
    s->ops.tickle = base_tickle;
    strncpy(s->name, name ? name : "scheduler", sizeof s->name - 1);
    s->nworkers = threads;
    s->use_caller = use_caller;
    atomic_init(&s->nlive, threads);
    return alloc_workers(s, threads);
}

/* Room for `cap` workers; only before start with nothing queued. */
int sp__sched_resize(sp_scheduler_t *s, int cap)
{
    if (cap <= s->cap)
        return 0;
    if (s->started || atomic_load(&s->ctl) != 0)
        return -EBUSY; /* queued tasks live in the slots */
    int rc = s->ops.resize ? s->ops.resize(s, cap) : 0;
    if (rc < 0)
        return rc;
    sp_worker_t *old = s->workers;
    int old_cap = s->cap;
    rc = alloc_workers(s, cap);
    if (rc < 0) {
        s->workers = old;
        s->cap = old_cap;
        return rc;
    }
    sp_worker_t *fresh = s->workers;
    s->workers = old;
    s->cap = old_cap;
    sp__sched_fini(s);
    s->workers = fresh;
    s->cap = cap;
    return 0;
}

void sp__sched_fini(sp_scheduler_t *s)
{
    for (int i = 0; i < s->cap; i++) {
        sp_worker_t *w = &s->workers[i];
        pthread_mutex_destroy(&w->lock);
        pthread_mutex_destroy(&w->sleep_lock);
        pthread_cond_destroy(&w->sleep_cond);
        sp__rq_fini(&w->shared);
        sp__rq_fini(&w->bound);
        sp__rq_fini(&w->local);
        sp_fiber_destroy(w->loop_fiber);
    }
    free(s->workers);
    s->workers = NULL;
}

sp_scheduler_t *sp_scheduler_create(const char *name, int threads,
                                    bool use_caller)
{
    sp_scheduler_t *s = malloc(sizeof *s);
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    int rc = sp__sched_init(s, name, threads, use_caller);
    if (rc < 0) {
        free(s);
        errno = -rc;
        return NULL;
    }
    return s;
}

int sp_scheduler_start(sp_scheduler_t *s)
{
    if (s->started)
        return -EALREADY;
    if (stopped(s))
        return -ESHUTDOWN;
    if (s->mon) {
        int rc = sp__monitor_start(s);
        if (rc < 0)
            return rc;
    }
    for (int i = s->use_caller ? 1 : 0; i < s->nworkers; i++) {
        int rc = pthread_create(&s->workers[i].thread, NULL, thread_main,
                                &s->workers[i]);
        if (rc != 0) {
            /* Workers already running exit when the count drains. */
            atomic_fetch_or(&s->ctl, CTL_STOPPING);
            try_finish(s, atomic_load(&s->ctl));
            for (int k = s->use_caller ? 1 : 0; k < i; k++)
                pthread_join(s->workers[k].thread, NULL);
            s->nworkers = i; /* joined; nothing left to stop */
            atomic_store(&s->nlive, i);
            if (s->mon)
                sp__monitor_stop(s);
            return -rc;
        }
    }
    s->started = true;
    return 0;
}

int sp_scheduler_stop(sp_scheduler_t *s)
{
    if (sp__thread()->worker)
        return -EDEADLK;
    if (atomic_load(&s->ctl) & CTL_STOPPING)
        return -EALREADY;
    if (!s->started) {
        int rc = sp_scheduler_start(s);
        if (rc < 0)
            return rc;
    }
    uint64_t v = atomic_fetch_or(&s->ctl, CTL_STOPPING) | CTL_STOPPING;
    try_finish(s, v);
    if (s->use_caller)
        sp_fiber_resume(s->workers[0].loop_fiber);
    for (int i = s->use_caller ? 1 : 0; i < s->nworkers; i++)
        pthread_join(s->workers[i].thread, NULL);
    /* Every task has finished; extra workers are leaving too. The monitor
     * goes first so that it starts no new one meanwhile. */
    if (s->mon)
        sp__monitor_stop(s);
    for (int i = s->nworkers; i < s->cap; i++) {
        if (s->workers[i].thread_live)
            pthread_join(s->workers[i].thread, NULL);
        s->workers[i].thread_live = false;
    }
    atomic_store(&s->nlive, s->nworkers);
    return 0;
}

void sp_scheduler_destroy(sp_scheduler_t *s)
{
    if (!s)
        return;
    sp__monitor_free(s);
    sp__sched_fini(s);
    free(s);
}

static int check_worker(const sp_scheduler_t *s, int worker)
{
    return worker == SP_ANY_WORKER || (worker >= 0 && worker < s->nworkers)
               ? 0
               : -EINVAL;
}

static int pick_target(sp_scheduler_t *s, int worker)
{
    return worker >= 0 ? worker : sp__dispatch_pick(s);
}

int sp_schedule(sp_scheduler_t *s, sp_fiber_fn fn, void *arg, int worker)
{
    if (!s || !fn || check_worker(s, worker) < 0)
        return -EINVAL;
    int rc = sp__sched_hold(s);
    if (rc < 0)
        return rc;
    sp_task_t t = {.fn = fn, .arg = arg};
    rc = enqueue(s, pick_target(s, worker), &t, worker >= 0);
    if (rc < 0)
        sp__sched_release(s);
    return rc;
}

int sp_schedule_fiber(sp_scheduler_t *s, sp_fiber_t *f, int worker)
{
    if (!s || !f || check_worker(s, worker) < 0)
        return -EINVAL;
    int st = sp_fiber_state(f);
    if (st != SP_FIBER_READY && st != SP_FIBER_SUSPENDED)
        return -EINVAL;
    int rc = sp__sched_hold(s);
    if (rc < 0)
        return rc;
    f->sched = s;
    f->bound = worker;
    f->pooled = false;
    f->last_worker = -1;
    atomic_store(&f->park, P_RUNNING);
    sp_task_t t = {.fiber = f};
    rc = enqueue(s, pick_target(s, worker), &t, worker >= 0);
    if (rc < 0)
        sp__sched_release(s);
    return rc;
}

/* The task fiber running on this thread, or NULL. */
static struct sp_fiber *current_task(void)
{
    sp_thread_t *t = sp__thread();
    struct sp_fiber *f = t->current;
    return f != &t->root && f->sched && t->worker ? f : NULL;
}

/* ---- direct hand-off -----------------------------------------------------
 * A fiber that parks or yields while the next task in line is one this
 * worker woke itself (its unlocked queue, nothing older in the locked
 * ones) switches straight to it rather than through the worker loop: one
 * switch instead of two, and when both fibers parked through the same calls
 * (a channel ping-pong) the return predictor is right on the way back up.
 * The loop's share of the switch-out (after_run) then runs on the next
 * fiber's stack, once the switch is complete. Not while the monitor
 * watches (it tracks one task per run_task) or the worker collects a poll's
 * wake-ups, and every SP_TICK_TASKS tasks the loop gets its turn to poll. */

static void finish_handoff(struct sp_fiber *prev)
{
    after_run(sp__thread()->worker, prev);
}

static struct sp_fiber *handoff_target(sp_worker_t *w)
{
    sp_scheduler_t *s = w->s;
    if (!w->local.count || s->monitored || w->collecting ||
        atomic_load_explicit(&w->n_shared, memory_order_relaxed) ||
        atomic_load_explicit(&w->n_bound, memory_order_relaxed))
        return NULL;
    if (s->ops.tick && w->since_tick + 1 >= w->tick_every)
        return NULL;
    sp_task_t t;
    if (!sp__rq_pop(&w->local, &t))
        return NULL;
    w->since_tick++;
    return t.fiber;
}

/* The current task fiber f gives up the thread: to the next local fiber,
 * or back to the worker loop. */
static int switch_out(struct sp_fiber *f)
{
    sp_thread_t *t = sp__thread();
    sp_worker_t *w = t->worker;
    struct sp_fiber *next = handoff_target(w);
    if (!next)
        return sp_fiber_yield();
    bump(&w->switches);
    next->caller = f->caller;
    atomic_store_explicit(&next->state, SP_FIBER_RUNNING, memory_order_relaxed);
    atomic_store_explicit(&f->state, SP_FIBER_SUSPENDED, memory_order_release);
    t->after_switch = finish_handoff;
    sp__fiber_switch(t, f, next, 0);
    return 0;
}

int sp_yield(void)
{
    struct sp_fiber *f = current_task();
    if (!f)
        return -EPERM;
    return switch_out(f);
}

int sp_park(void)
{
    struct sp_fiber *f = current_task();
    if (!f)
        return -EPERM;
    int expect = P_RUNNING;
    if (!atomic_compare_exchange_strong(&f->park, &expect, P_PARKING)) {
        atomic_store(&f->park, P_RUNNING); /* consume the early wake */
        return 0;
    }
    return switch_out(f);
}

/* Record a wake of f; true if f was parked and the caller must now queue
 * (or run) it. */
static bool wake_claim(struct sp_fiber *f)
{
    for (;;) {
        int p = atomic_load(&f->park);
        int next;
        switch (p) {
        case P_RUNNING: next = P_PERMIT; break;
        case P_PARKING: next = P_WOKEN; break;
        case P_PARKED: next = P_RUNNING; break;
        default: return false; /* a wake is already pending */
        }
        if (atomic_compare_exchange_weak(&f->park, &p, next))
            return p == P_PARKED;
    }
}

int sp_wake(sp_fiber_t *f)
{
    if (!f || !f->sched)
        return -EINVAL;
    if (wake_claim(f))
        requeue(f->sched, f);
    return 0;
}

sp_scheduler_t *sp_scheduler_current(void)
{
    sp_worker_t *w = sp__thread()->worker;
    return w ? w->s : NULL;
}

int sp_worker_index(void)
{
    sp_worker_t *w = sp__thread()->worker;
    return w ? w->index : -1;
}

int sp_scheduler_threads(const sp_scheduler_t *s)
{
    return s->nworkers;
}

const char *sp_scheduler_name(const sp_scheduler_t *s)
{
    return s->name;
}

int sp_scheduler_stats(const sp_scheduler_t *s, int worker,
                       sp_worker_stats_t *out)
{
    if (!s || !out || worker < 0 || worker >= s->cap)
        return -EINVAL;
    const sp_worker_t *w = &s->workers[worker];
    out->tasks_run = atomic_load_explicit(&w->tasks_run, memory_order_relaxed);
    out->switches = atomic_load_explicit(&w->switches, memory_order_relaxed);
    out->steals = atomic_load_explicit(&w->steals, memory_order_relaxed);
    return 0;
}

/* ---- waiters ----------------------------------------------------------- */

void sp__waiter_init(sp_waiter_t *w)
{
    w->fiber = sp_fiber_current();
    w->result = 0;
    atomic_init(&w->promised, 0);
    atomic_init(&w->delivered, 0);
    w->sole = false;
}

void sp__waiter_init_sole(sp_waiter_t *w)
{
    sp__waiter_init(w);
    w->sole = true;
}

void sp__waiter_promise(sp_waiter_t *w, int result)
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
static void mark_delivered(sp_waiter_t *w)
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

void sp__waiter_deliver(sp_waiter_t *w, bool wake)
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

struct sp_fiber *sp__waiter_deliver_here(sp_waiter_t *w)
{
    struct sp_fiber *f = w->fiber;
    /* No pins: f runs only on its worker, this thread, busy here; if it
     * belongs elsewhere, f is not touched after it is queued. */
    mark_delivered(w);
    if (!wake_claim(f))
        return NULL;
    if (on_home_worker(f))
        return f;
    requeue(f->sched, f);
    return NULL;
}

void sp__waiter_wait(sp_waiter_t *w)
{
    while (!atomic_load(&w->delivered)) {
        if (atomic_load(&w->promised))
            sp_yield(); /* a waker is between its promise and delivery */
        else
            sp_park();
    }
}

int sp__waiter_settle(sp_waiter_t *w)
{
    while (atomic_load(&w->delivered) != atomic_load(&w->promised))
        sp_yield();
    return w->result;
}
