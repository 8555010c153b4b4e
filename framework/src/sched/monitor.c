/* Blocking-code monitor: notices a worker stuck in one fiber (a CPU-bound
 * loop, a blocking call the hooks do not cover), says which, and gets its
 * queued work done elsewhere; optionally grows the worker count while
 * workers are stuck and shrinks it back.
 *
 * Cost on the hot path: a worker publishes each task it starts (fiber id,
 * name, an odd sequence number) and bumps the sequence again when the task
 * switches out, with plain relaxed stores on a cache line only it writes
 * (scheduler.c, publish_start). This thread samples every stall/2: a
 * sequence that is odd and unchanged since a sample at least `stall` ago
 * means one fiber has held the worker all that time (libgo's Mark /
 * IsBlocking, without a clock read per switch). The id and name are read
 * seqlock-style and dropped if the sequence moved meanwhile, so a fiber
 * that finishes and is freed is never touched from here.
 *
 * What happens to a stuck worker's queue: the worker is flagged; dispatch
 * stops placing new work on it; every other worker, busy or idle, checks
 * the flag count on each loop and takes its never-started tasks (and, with
 * migrate_stuck, its started fibers not bound to it); idle workers are
 * woken for that at once.
 *
 * Growth: while more workers are stuck than extras run, start one more in
 * the next preallocated slot, up to max_threads; after shrink_after with no
 * stuck worker, ask the last extra to retire. It leaves once no queued task
 * and no started fiber lives there, and for an IOManager no armed timer or
 * watch (scheduler.c, try_leave; iomanager.c, iom_may_leave), and this
 * thread joins it.
 */
#include "base/clock.h"
#include "scheduler_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spindle/log.h"

static int64_t now_ns(void)
{
    return (int64_t)sp__now_ns();
}

typedef struct seen {
    uint64_t seq;   /* run_seq at the first sample that saw it */
    int64_t since;  /* when that was */
    bool reported;
} seen_t;

struct sp_monitor {
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool quit;
    int64_t stall_ns, period_ns, shrink_ns;
    int max_threads;
    int retiring;        /* slot asked to retire, or -1 */
    int64_t calm_since;  /* no worker stuck since (0: one is) */
    sp_logger_t *log;
    seen_t *seen;        /* per worker slot */
};

/* ---- configuration ------------------------------------------------------ */

int sp_scheduler_set_monitor(sp_scheduler_t *s, const sp_monitor_opts_t *o)
{
    if (!s)
        return -EINVAL;
    if (s->started)
        return -EBUSY;
    if (!o) { /* off again */
        sp__monitor_free(s);
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
    struct sp_monitor *m = s->mon;
    if (!m) {
        m = calloc(1, sizeof *m);
        if (!m)
            return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&m->cond, &ca);
        pthread_condattr_destroy(&ca);
        s->mon = m;
    }
    free(m->seen);
    m->seen = calloc((size_t)s->cap, sizeof *m->seen);
    if (!m->seen) {
        sp__monitor_free(s);
        return -ENOMEM;
    }
    m->stall_ns = o->stall_us * 1000;
    m->period_ns = m->stall_ns / 2 > 0 ? m->stall_ns / 2 : 1;
    m->shrink_ns = (o->shrink_after_us ? o->shrink_after_us : 10 * o->stall_us) * 1000;
    m->max_threads = max;
    m->retiring = -1;
    m->log = sp_logger("spindle.monitor"); /* NULL: the root logger */
    s->monitored = true;
    s->migrate_stuck = o->migrate_stuck;
    return 0;
}

int sp_scheduler_monitor_stats(const sp_scheduler_t *s,
                               sp_monitor_stats_t *out)
{
    if (!s || !out)
        return -EINVAL;
    out->stalls = atomic_load(&s->m_stalls);
    out->rescued = atomic_load(&s->m_rescued);
    out->migrated = atomic_load(&s->m_migrated);
    out->grown = atomic_load(&s->m_grown);
    out->shrunk = atomic_load(&s->m_shrunk);
    out->threads = sp__sched_nlive(s);
    return 0;
}

/* ---- sampling ----------------------------------------------------------- */

/* The running fiber's id and name, if the worker is still on task `seq`. */
static bool read_task(sp_worker_t *w, uint64_t seq, uint64_t *fid,
                      char name[33])
{
    uint64_t words[4];
    *fid = atomic_load_explicit(&w->run_fid, memory_order_relaxed);
    for (int i = 0; i < 4; i++)
        words[i] = atomic_load_explicit(&w->run_name[i], memory_order_relaxed);
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

/* Wake every sleeping worker so it takes the stuck worker's queue now. */
static void rouse_idle(sp_scheduler_t *s, int except)
{
    int n = sp__sched_nlive(s);
    for (int i = 0; i < n; i++)
        if (i != except && sp__sched_claim(&s->workers[i]))
            s->ops.tickle(s, i);
}

static void report(sp_scheduler_t *s, struct sp_monitor *m, int i,
                   uint64_t seq, int64_t held)
{
    sp_worker_t *w = &s->workers[i];
    uint64_t fid;
    char name[33];
    if (!read_task(w, seq, &fid, name))
        return; /* it moved on after all */
    m->seen[i].reported = true;
    atomic_store(&w->stuck, 1);
    atomic_fetch_add(&s->nstuck, 1);
    atomic_fetch_add(&s->m_stalls, 1);
    SP_LOG_WARN(m->log,
                "%s: worker %d stuck for %" PRId64 " ms in fiber %" PRIu64
                " (%s); other workers take its queued tasks",
                s->name, i, held / 1000000, fid, name);
    rouse_idle(s, i);
}

static void recovered(sp_scheduler_t *s, struct sp_monitor *m, int i,
                      int64_t held)
{
    atomic_store(&s->workers[i].stuck, 0);
    atomic_fetch_sub(&s->nstuck, 1);
    SP_LOG_INFO(m->log, "%s: worker %d running again after at least %" PRId64
                " ms", s->name, i, held / 1000000);
    m->seen[i].reported = false;
}

static void sample(sp_scheduler_t *s, struct sp_monitor *m, int64_t now)
{
    int n = sp__sched_nlive(s);
    for (int i = 0; i < n; i++) {
        seen_t *e = &m->seen[i];
        uint64_t seq = atomic_load_explicit(&s->workers[i].run_seq,
                                            memory_order_acquire);
        if ((seq & 1) && seq == e->seq) {
            if (!e->reported && now - e->since >= m->stall_ns)
                report(s, m, i, seq, now - e->since);
            continue;
        }
        if (e->reported)
            recovered(s, m, i, now - e->since);
        e->seq = seq;
        e->since = now;
    }
}

/* ---- growth ------------------------------------------------------------- */

static void grow(sp_scheduler_t *s, struct sp_monitor *m, int i)
{
    m->seen[i] = (seen_t){0};
    int rc = sp__sched_spawn(s, i);
    if (rc < 0) {
        if (rc != -ESHUTDOWN)
            SP_LOG_ERROR(m->log, "%s: cannot start an extra worker: %s",
                         s->name, strerror(-rc));
        return;
    }
    atomic_fetch_add(&s->m_grown, 1);
    SP_LOG_INFO(m->log, "%s: started extra worker %d while workers are stuck",
                s->name, i);
}

static void resize(sp_scheduler_t *s, struct sp_monitor *m, int64_t now)
{
    int n = sp__sched_nlive(s);
    int extras = n - s->nworkers;
    int stuck = atomic_load(&s->nstuck);
    if (stuck)
        m->calm_since = 0;
    else if (!m->calm_since)
        m->calm_since = now;
    if (m->retiring >= 0) { /* one at a time, the last slot first */
        sp_worker_t *w = &s->workers[m->retiring];
        if (!atomic_load_explicit(&w->exited, memory_order_acquire))
            return;
        pthread_join(w->thread, NULL);
        w->thread_live = false;
        atomic_store(&w->retiring, 0);
        atomic_store(&s->nlive, m->retiring);
        atomic_fetch_add(&s->m_shrunk, 1);
        SP_LOG_INFO(m->log, "%s: extra worker %d retired", s->name,
                    m->retiring);
        m->retiring = -1;
        return;
    }
    if (stuck > extras && n < m->max_threads) {
        grow(s, m, n);
    } else if (!stuck && extras > 0 && now - m->calm_since >= m->shrink_ns) {
        sp_worker_t *w = &s->workers[n - 1];
        m->retiring = n - 1;
        atomic_store(&w->retiring, 1);
        if (sp__sched_claim(w)) /* asleep: let it look at the flag */
            s->ops.tickle(s, n - 1);
    }
}

/* ---- the thread --------------------------------------------------------- */

static void *monitor_main(void *arg)
{
    sp_scheduler_t *s = arg;
    struct sp_monitor *m = s->mon;
    pthread_mutex_lock(&m->lock);
    while (!m->quit) {
        int64_t deadline = now_ns() + m->period_ns;
        struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
        while (!m->quit && now_ns() < deadline)
            pthread_cond_timedwait(&m->cond, &m->lock, &ts);
        if (m->quit)
            break;
        pthread_mutex_unlock(&m->lock);
        int64_t now = now_ns();
        sample(s, m, now);
        if (m->max_threads > s->nworkers)
            resize(s, m, now);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int sp__monitor_start(sp_scheduler_t *s)
{
    struct sp_monitor *m = s->mon;
    m->quit = false;
    int rc = pthread_create(&m->thread, NULL, monitor_main, s);
    if (rc != 0)
        return -rc;
    m->running = true;
    return 0;
}

void sp__monitor_stop(sp_scheduler_t *s)
{
    struct sp_monitor *m = s->mon;
    if (!m || !m->running)
        return;
    pthread_mutex_lock(&m->lock);
    m->quit = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    m->running = false;
    /* The workers have finished: close the episodes still open in the log. */
    sample(s, m, now_ns());
}

void sp__monitor_free(sp_scheduler_t *s)
{
    struct sp_monitor *m = s->mon;
    if (!m)
        return;
    sp__monitor_stop(s);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m->seen);
    free(m);
    s->mon = NULL;
}
