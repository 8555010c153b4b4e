/* The scheduler's side of the blocking-code monitor (monitor.c): its
 * public options and stats, and the host (monitor.h) through which the
 * monitor thread samples the workers and acts on a stuck one. The monitor
 * knows nothing else of the scheduler; what each call does to the workers
 * is here.
 *
 * The samples are the seqlock the worker writes (worker.c, run_task, and
 * sp__sched_publish_start below): run_seq is odd while a task runs and
 * grows by 2 per task; the id and name are read between two loads of it
 * and dropped if it moved, so a fiber that finished and was freed is never
 * touched.
 */
#include "scheduler_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration ------------------------------------------------------ */

int sp_scheduler_set_monitor(sp_scheduler_t *s, const sp_monitor_opts_t *o)
{
    if (!s)
        return -EINVAL;
    if (s->started)
        return -EBUSY;
    if (!o) { /* off again */
        sp__sched_monitor_free(s);
        s->monitored = false;
        s->migrate_stuck = false;
        return 0;
    }
    int max = o->max_threads ? o->max_threads : s->nworkers;
    if (o->stall_us <= 0 || o->shrink_after_us < 0 || max < s->nworkers ||
        max > 1024)
        return -EINVAL;
    int rc = sp__sched_resize(s, max);
    if (rc < 0)
        return rc;
    if (!s->mon && !(s->mon = sp__monitor_new()))
        return -ENOMEM;
    if (sp__monitor_configure(s->mon, o, max, s->cap) < 0) {
        sp__sched_monitor_free(s);
        return -ENOMEM;
    }
    s->monitored = true;
    s->migrate_stuck = o->migrate_stuck;
    return 0;
}

int sp_scheduler_monitor_stats(const sp_scheduler_t *s,
                               sp_monitor_stats_t *out)
{
    if (!s || !out)
        return -EINVAL;
    if (s->mon)
        sp__monitor_counts(s->mon, out);
    else
        out->stalls = out->grown = out->shrunk = 0;
    out->rescued = atomic_load(&s->m_rescued);
    out->migrated = atomic_load(&s->m_migrated);
    out->threads = sp__sched_nlive(s);
    return 0;
}

void sp__sched_monitor_free(sp_scheduler_t *s)
{
    sp__monitor_destroy(s->mon);
    s->mon = NULL;
}

/* ---- the host: what the monitor thread reads and does ------------------- */

static int host_nlive(void *ctx)
{
    return sp__sched_nlive(ctx);
}

static int host_nstuck(void *ctx)
{
    sp_scheduler_t *s = ctx;
    return atomic_load(&s->nstuck);
}

static uint64_t host_run_seq(void *ctx, int i)
{
    sp_scheduler_t *s = ctx;
    return atomic_load_explicit(&s->workers[i].run_seq, memory_order_acquire);
}

/* The running fiber's id and name, if the worker is still on task `seq`. */
static bool host_read_task(void *ctx, int i, uint64_t seq, uint64_t *fid,
                           char name[33])
{
    sp__worker_t *w = &((sp_scheduler_t *)ctx)->workers[i];
    uint64_t words[4];
    *fid = atomic_load_explicit(&w->run_fid, memory_order_relaxed);
    for (int k = 0; k < 4; k++)
        words[k] = atomic_load_explicit(&w->run_name[k], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&w->run_seq, memory_order_relaxed) != seq)
        return false;
    if (!words[0]) {
        strcpy(name, "task");
    } else {
        memcpy(name, words, sizeof words);
        name[32] = '\0';
    }
    return true;
}

/* Flagged: dispatch places nothing new there and every other worker takes
 * its queued work (steal.c, rescue) while nstuck is nonzero. */
static void host_set_stuck(void *ctx, int i, bool stuck)
{
    sp_scheduler_t *s = ctx;
    atomic_store(&s->workers[i].stuck, stuck);
    if (stuck)
        atomic_fetch_add(&s->nstuck, 1);
    else
        atomic_fetch_sub(&s->nstuck, 1);
}

/* Wake every sleeping worker so it takes the stuck worker's queue now. */
static void host_rouse(void *ctx, int except)
{
    sp_scheduler_t *s = ctx;
    int n = sp__sched_nlive(s);
    for (int i = 0; i < n; i++)
        if (i != except && sp__sched_claim(&s->workers[i]))
            s->ops.tickle(s, i);
}

static int host_spawn(void *ctx, int i)
{
    return sp__sched_spawn(ctx, i);
}

/* An extra worker asked to retire leaves once it has nothing queued, no
 * started fiber lives here (a parked one will come back to this worker)
 * and the extension does not need it (an IOManager: armed timers and
 * watches). `gone` is set under the lock, so no push lands here
 * afterwards. */
bool sp__sched_try_leave(sp__worker_t *w)
{
    sp_scheduler_t *s = w->s;
    if (atomic_load(&w->owned) != (uint64_t)atomic_load(&w->migrated_out))
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

/* The worker leaves once it has nothing left (sp__sched_try_leave). */
static void host_retire(void *ctx, int i)
{
    sp_scheduler_t *s = ctx;
    sp__worker_t *w = &s->workers[i];
    atomic_store(&w->retiring, 1);
    if (sp__sched_claim(w)) /* asleep: let it look at the flag */
        s->ops.tickle(s, i);
}

static bool host_reap(void *ctx, int i)
{
    sp_scheduler_t *s = ctx;
    sp__worker_t *w = &s->workers[i];
    if (!atomic_load_explicit(&w->exited, memory_order_acquire))
        return false;
    pthread_join(w->thread, NULL);
    w->thread_live = false;
    atomic_store(&w->retiring, 0);
    atomic_store(&s->nlive, i);
    return true;
}

int sp__sched_monitor_start(sp_scheduler_t *s)
{
    sp__monitor_host_t h = {
        .ctx = s, .name = s->name, .nbase = s->nworkers,
        .nlive = host_nlive, .nstuck = host_nstuck, .run_seq = host_run_seq,
        .read_task = host_read_task, .set_stuck = host_set_stuck,
        .rouse = host_rouse, .spawn = host_spawn, .retire = host_retire,
        .reap = host_reap,
    };
    return sp__monitor_start(s->mon, &h);
}

void sp__sched_monitor_stop(sp_scheduler_t *s)
{
    sp__monitor_stop(s->mon);
}

/* Tell the monitor which fiber runs (owner-only relaxed stores). The name
 * is copied because the monitor must not touch a fiber that may finish
 * and be freed meanwhile; function tasks are all called "task". The seq
 * is bumped last (release) so a sampler that sees it also sees the rest. */
void sp__sched_publish_start(sp__worker_t *w, const struct sp_fiber *f)
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
