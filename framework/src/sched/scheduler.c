/* N:M scheduler: live-task accounting and the public lifecycle API
 * (create, start, stop, destroy, sp_schedule*, accessors, stats). The
 * workers' side, queues and the per-switch hot path, is worker.c; stealing
 * is steal.c; placement (dispatch.c) and the monitor (monitor.c) see the
 * scheduler only through the interfaces it hands them (dispatch.h,
 * monitor.h; scheduler_monitor.c).
 *
 * Stopping: `ctl` counts live tasks (queued, running or parked) plus holds
 * from extensions; stop() sets STOPPING and the count reaching zero then sets
 * STOPPED, after which every worker exits and submissions fail.
 */
#include "scheduler_internal.h"

#include "base/fence.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
        if (v & SP_CTL_STOPPED)
            return -ESHUTDOWN;
    } while (!atomic_compare_exchange_weak(&s->ctl, &v, v + 1));
    return 0;
}

static void try_finish(sp_scheduler_t *s, uint64_t v)
{
    if (v == SP_CTL_STOPPING &&
        atomic_compare_exchange_strong(&s->ctl, &v, v | SP_CTL_STOPPED))
        wake_all(s);
}

void sp__sched_release(sp_scheduler_t *s)
{
    try_finish(s, atomic_fetch_sub(&s->ctl, 1) - 1);
}

/* ---- the base idle: a binary semaphore per worker --------------------- */

static void base_idle(sp_scheduler_t *s, int worker)
{
    sp__worker_t *w = &s->workers[worker];
    pthread_mutex_lock(&w->sleep_lock);
    while (!w->signaled)
        pthread_cond_wait(&w->sleep_cond, &w->sleep_lock);
    w->signaled = false;
    pthread_mutex_unlock(&w->sleep_lock);
}

static void base_tickle(sp_scheduler_t *s, int worker)
{
    sp__worker_t *w = &s->workers[worker];
    pthread_mutex_lock(&w->sleep_lock);
    w->signaled = true;
    pthread_cond_signal(&w->sleep_cond);
    pthread_mutex_unlock(&w->sleep_lock);
}

int sp__sched_spawn(sp_scheduler_t *s, int i)
{
    if (sp__sched_stopped(s))
        return -ESHUTDOWN;
    if (s->ops.spawn) {
        int rc = s->ops.spawn(s, i);
        if (rc < 0)
            return rc;
    }
    sp__worker_t *w = &s->workers[i];
    w->gone = false;
    atomic_store(&w->owned, 0);
    w->signaled = false;
    atomic_store(&w->migrated_out, 0);
    atomic_store(&w->retiring, 0);
    atomic_store(&w->exited, 0);
    atomic_store(&w->idle, 0);
    atomic_store(&s->nlive, i + 1); /* visible before the thread runs */
    int rc = pthread_create(&w->thread, NULL, sp__sched_thread_main, w);
    if (rc != 0) {
        atomic_store(&s->nlive, i);
        return -rc;
    }
    w->thread_live = true;
    return 0;
}

/* ---- public API --------------------------------------------------------- */

/* Placement's view of the workers (dispatch.h). */
/* The calling thread's worker, if new work may be placed on it; else -1. */
static int dispatch_self(const sp_scheduler_t *s)
{
    sp__worker_t *w = sp__sched_self(s);
    return w && sp__sched_usable(w) ? w->index : -1;
}

static bool dispatch_usable(const void *ctx, int i)
{
    const sp_scheduler_t *s = ctx;
    return sp__sched_usable(&s->workers[i]);
}

static size_t dispatch_load(const void *ctx, int i)
{
    const sp_scheduler_t *s = ctx;
    const sp__worker_t *w = &s->workers[i];
    return atomic_load_explicit(&w->n_shared, memory_order_relaxed) +
           atomic_load_explicit(&w->n_bound, memory_order_relaxed) +
           !atomic_load_explicit(&w->idle, memory_order_relaxed);
}

/* Allocate `cap` worker slots (the base workers plus room for extras, so
 * growing never reallocates under running threads). */
static int alloc_workers(sp_scheduler_t *s, int cap)
{
    s->workers = aligned_alloc(64, sizeof(sp__worker_t) * (size_t)cap);
    if (!s->workers)
        return -ENOMEM;
    s->cap = cap;
    memset(s->workers, 0, sizeof(sp__worker_t) * (size_t)cap);
    for (int i = 0; i < cap; i++) {
        sp__worker_t *w = &s->workers[i];
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
        sp__worker_t *w0 = &s->workers[0];
        w0->loop_fiber = sp_fiber_create(sp__sched_caller_loop, w0, 0, s->name);
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
    sp__fence_asym_init(); /* before any of its fibers waits (waiter.c) */
    memset(s, 0, sizeof *s);
    s->ops.idle = base_idle;
    s->ops.tickle = base_tickle;
    strncpy(s->name, name ? name : "scheduler", sizeof s->name - 1);
    s->nworkers = threads;
    s->use_caller = use_caller;
    atomic_init(&s->nlive, threads);
    s->disp = (sp__dispatcher_t){.policy = SP_DISPATCH_LOCAL_FIRST,
                                .nbase = &s->nworkers, .nlive = &s->nlive,
                                .rr = &s->rr, .watched = &s->monitored,
                                .ctx = s,
                                .usable = dispatch_usable,
                                .load = dispatch_load};
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
    sp__worker_t *old = s->workers;
    int old_cap = s->cap;
    rc = alloc_workers(s, cap);
    if (rc < 0) {
        s->workers = old;
        s->cap = old_cap;
        return rc;
    }
    sp__worker_t *fresh = s->workers;
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
        sp__worker_t *w = &s->workers[i];
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
    if (sp__sched_stopped(s))
        return -ESHUTDOWN;
    if (s->mon) {
        int rc = sp__sched_monitor_start(s);
        if (rc < 0)
            return rc;
    }
    for (int i = s->use_caller ? 1 : 0; i < s->nworkers; i++) {
        int rc = pthread_create(&s->workers[i].thread, NULL, sp__sched_thread_main,
                                &s->workers[i]);
        if (rc != 0) {
            /* Workers already running exit when the count drains. */
            atomic_fetch_or(&s->ctl, SP_CTL_STOPPING);
            try_finish(s, atomic_load(&s->ctl));
            for (int k = s->use_caller ? 1 : 0; k < i; k++)
                pthread_join(s->workers[k].thread, NULL);
            s->nworkers = i; /* joined; nothing left to stop */
            atomic_store(&s->nlive, i);
            if (s->mon)
                sp__sched_monitor_stop(s);
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
    if (atomic_load(&s->ctl) & SP_CTL_STOPPING)
        return -EALREADY;
    if (!s->started) {
        int rc = sp_scheduler_start(s);
        if (rc < 0)
            return rc;
    }
    uint64_t v = atomic_fetch_or(&s->ctl, SP_CTL_STOPPING) | SP_CTL_STOPPING;
    try_finish(s, v);
    if (s->use_caller)
        sp_fiber_resume(s->workers[0].loop_fiber);
    for (int i = s->use_caller ? 1 : 0; i < s->nworkers; i++)
        pthread_join(s->workers[i].thread, NULL);
    /* Every task has finished; extra workers are leaving too. The monitor
     * goes first so that it starts no new one meanwhile. */
    if (s->mon)
        sp__sched_monitor_stop(s);
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
    sp__sched_monitor_free(s);
    sp__sched_fini(s);
    free(s);
}

int sp_scheduler_set_dispatch(sp_scheduler_t *s, sp_dispatch_t d)
{
    if (!s || sp__dispatch_check(d) < 0)
        return -EINVAL;
    if (s->started)
        return -EBUSY;
    s->disp.policy = d;
    return 0;
}

static int check_worker(const sp_scheduler_t *s, int worker)
{
    return worker == SP_ANY_WORKER || (worker >= 0 && worker < s->nworkers)
               ? 0
               : -EINVAL;
}

static int pick_target(sp_scheduler_t *s, int worker)
{
    return worker >= 0 ? worker : sp__dispatch_pick(&s->disp, dispatch_self(s));
}

int sp_schedule(sp_scheduler_t *s, sp_fiber_fn fn, void *arg, int worker)
{
    if (!s || !fn || check_worker(s, worker) < 0)
        return -EINVAL;
    int rc = sp__sched_hold(s);
    if (rc < 0)
        return rc;
    sp__task_t t = {.fn = fn, .arg = arg};
    rc = sp__sched_enqueue(s, pick_target(s, worker), &t, worker >= 0,
                           SP_RSV_NONE);
    if (rc < 0)
        sp__sched_release(s);
    return rc;
}

/* Spare slots promised at once when none is left: the lock is then taken
 * once per this many reservations while their number grows, and never
 * while fibers come and go at a steady count. */
enum { RSV_GRANT = 32 };

/* No spare promised slot: promise up to RSV_GRANT more under the lock,
 * growing the queue only if none is free. With the queue's tasks the
 * promised slots then never outnumber its room (pushes without a
 * reservation keep them free), so a reserved push finds a free slot. */
int sp__sched_reserve_locked(sp__worker_t *w, bool bound)
{
    sp__run_queue_t *q = bound ? &w->bound : &w->shared;
    size_t *slots = &w->rsv_slots[bound];
    pthread_mutex_lock(&w->lock);
    int rc = sp__rq_room(q, q->count + *slots + 1);
    if (rc == 0) {
        size_t k = q->cap - q->count - *slots;
        k = k < RSV_GRANT ? k : RSV_GRANT;
        *slots += k; /* one for the caller, the rest spare */
        atomic_fetch_add_explicit(&w->rsv_spare[bound], k - 1,
                                  memory_order_relaxed);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int sp__sched_make_room(sp__worker_t *w, sp__run_queue_t *q, bool bound)
{
    size_t *slots = &w->rsv_slots[bound];
    *slots -= atomic_exchange_explicit(&w->rsv_spare[bound], 0,
                                       memory_order_relaxed);
    return sp__rq_room(q, q->count + 1 + *slots);
}

int sp__sched_submit_reserved(sp_scheduler_t *s, int rw, sp_fiber_fn fn,
                              void *arg, int worker)
{
    bool bound = worker >= 0;
    int rc = sp__sched_hold(s);
    if (rc < 0) {
        sp__sched_unreserve(&s->workers[rw], bound);
        return rc;
    }
    sp__task_t t = {.fn = fn, .arg = arg};
    rc = sp__sched_enqueue(s, pick_target(s, worker), &t, bound, SP_RSV_NONE);
    if (rc == -ENOMEM) /* the reserved slot: the push uses it up */
        rc = sp__sched_enqueue(s, rw, &t, bound, SP_RSV_SPEND);
    else
        sp__sched_unreserve(&s->workers[rw], bound);
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
    atomic_store(&f->park, SP_PARK_RUNNING);
    sp__task_t t = {.fiber = f};
    rc = sp__sched_enqueue(s, pick_target(s, worker), &t, worker >= 0,
                           SP_RSV_NONE);
    if (rc < 0)
        sp__sched_release(s);
    return rc;
}

sp_scheduler_t *sp_scheduler_current(void)
{
    sp__worker_t *w = sp__thread()->worker;
    return w ? w->s : NULL;
}

int sp_worker_index(void)
{
    sp__worker_t *w = sp__thread()->worker;
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
    const sp__worker_t *w = &s->workers[worker];
    out->tasks_run = atomic_load_explicit(&w->tasks_run, memory_order_relaxed);
    out->switches = atomic_load_explicit(&w->switches, memory_order_relaxed);
    out->steals = atomic_load_explicit(&w->steals, memory_order_relaxed);
    out->polls = atomic_load_explicit(&w->polls, memory_order_relaxed);
    out->idle_us = atomic_load_explicit(&w->idle_ns, memory_order_relaxed) / 1000;
    out->fibers = atomic_load_explicit(&w->owned, memory_order_relaxed) -
                  (uint64_t)atomic_load_explicit(&w->migrated_out, memory_order_relaxed);
    out->queued = atomic_load_explicit(&w->n_shared, memory_order_relaxed) +
                  atomic_load_explicit(&w->n_bound, memory_order_relaxed);
    return 0;
}
