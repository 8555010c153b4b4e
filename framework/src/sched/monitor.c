/* Blocking-code monitor: notices a worker stuck in one fiber (a CPU-bound
 * loop, a blocking call the hooks do not cover), says which, and gets its
 * queued work done elsewhere; optionally grows the worker count while
 * workers are stuck and shrinks it back.
 *
 * Cost on the hot path: a worker publishes each task it starts (fiber id,
 * name, an odd sequence number) and bumps the sequence again when the task
 * switches out, with plain relaxed stores on a cache line only it writes
 * (scheduler_monitor.c, sp__sched_publish_start). This thread samples every stall/2: a
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
 * watch (sp__sched_try_leave; iomanager.c, iom_may_leave), and this
 * thread joins it.
 */
#include "base/clock.h"
#include "monitor.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
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

struct sp__monitor {
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
    sp__monitor_host_t h; /* the scheduler watched, while running */
    _Atomic uint64_t stalls, grown, shrunk;
};

/* ---- configuration ------------------------------------------------------ */

sp__monitor_t *sp__monitor_new(void)
{
    sp__monitor_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    return m;
}

int sp__monitor_configure(sp__monitor_t *m, const sp_monitor_opts_t *o,
                          int max_threads, int slots)
{
    free(m->seen);
    m->seen = calloc((size_t)slots, sizeof *m->seen);
    if (!m->seen)
        return -ENOMEM;
    m->stall_ns = o->stall_us * 1000;
    m->period_ns = m->stall_ns / 2 > 0 ? m->stall_ns / 2 : 1;
    m->shrink_ns = (o->shrink_after_us ? o->shrink_after_us : 10 * o->stall_us) * 1000;
    m->max_threads = max_threads;
    m->retiring = -1;
    m->log = sp_logger("spindle.monitor"); /* NULL: the root logger */
    return 0;
}

void sp__monitor_counts(const sp__monitor_t *m, sp_monitor_stats_t *out)
{
    out->stalls = atomic_load(&m->stalls);
    out->grown = atomic_load(&m->grown);
    out->shrunk = atomic_load(&m->shrunk);
}

/* ---- sampling ----------------------------------------------------------- */

static void report(sp__monitor_t *m, int i, uint64_t seq, int64_t held)
{
    const sp__monitor_host_t *h = &m->h;
    uint64_t fid;
    char name[33];
    if (!h->read_task(h->ctx, i, seq, &fid, name))
        return; /* it moved on after all */
    m->seen[i].reported = true;
    h->set_stuck(h->ctx, i, true);
    atomic_fetch_add(&m->stalls, 1);
    SP_LOG_WARN(m->log,
                "%s: worker %d stuck for %" PRId64 " ms in fiber %" PRIu64
                " (%s); other workers take its queued tasks",
                h->name, i, held / 1000000, fid, name);
    h->rouse(h->ctx, i);
}

static void recovered(sp__monitor_t *m, int i, int64_t held)
{
    const sp__monitor_host_t *h = &m->h;
    h->set_stuck(h->ctx, i, false);
    SP_LOG_INFO(m->log, "%s: worker %d running again after at least %" PRId64
                " ms", h->name, i, held / 1000000);
    m->seen[i].reported = false;
}

static void sample(sp__monitor_t *m, int64_t now)
{
    const sp__monitor_host_t *h = &m->h;
    int n = h->nlive(h->ctx);
    for (int i = 0; i < n; i++) {
        seen_t *e = &m->seen[i];
        uint64_t seq = h->run_seq(h->ctx, i);
        if ((seq & 1) && seq == e->seq) {
            if (!e->reported && now - e->since >= m->stall_ns)
                report(m, i, seq, now - e->since);
            continue;
        }
        if (e->reported)
            recovered(m, i, now - e->since);
        e->seq = seq;
        e->since = now;
    }
}

/* ---- growth ------------------------------------------------------------- */

static void grow(sp__monitor_t *m, int i)
{
    const sp__monitor_host_t *h = &m->h;
    m->seen[i] = (seen_t){0};
    int rc = h->spawn(h->ctx, i);
    if (rc < 0) {
        if (rc != -ESHUTDOWN)
            SP_LOG_ERROR(m->log, "%s: cannot start an extra worker: %s",
                         h->name, strerror(-rc));
        return;
    }
    atomic_fetch_add(&m->grown, 1);
    SP_LOG_INFO(m->log, "%s: started extra worker %d while workers are stuck",
                h->name, i);
}

static void resize(sp__monitor_t *m, int64_t now)
{
    const sp__monitor_host_t *h = &m->h;
    int n = h->nlive(h->ctx);
    int extras = n - h->nbase;
    int stuck = h->nstuck(h->ctx);
    if (stuck)
        m->calm_since = 0;
    else if (!m->calm_since)
        m->calm_since = now;
    if (m->retiring >= 0) { /* one at a time, the last slot first */
        if (!h->reap(h->ctx, m->retiring))
            return;
        atomic_fetch_add(&m->shrunk, 1);
        SP_LOG_INFO(m->log, "%s: extra worker %d retired", h->name,
                    m->retiring);
        m->retiring = -1;
        return;
    }
    if (stuck > extras && n < m->max_threads) {
        grow(m, n);
    } else if (!stuck && extras > 0 && now - m->calm_since >= m->shrink_ns) {
        m->retiring = n - 1;
        h->retire(h->ctx, n - 1);
    }
}

/* ---- the thread --------------------------------------------------------- */

static void *monitor_main(void *arg)
{
    sp__monitor_t *m = arg;
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
        sample(m, now);
        if (m->max_threads > m->h.nbase)
            resize(m, now);
        pthread_mutex_lock(&m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int sp__monitor_start(sp__monitor_t *m, const sp__monitor_host_t *host)
{
    m->h = *host;
    m->quit = false;
    int rc = pthread_create(&m->thread, NULL, monitor_main, m);
    if (rc != 0)
        return -rc;
    m->running = true;
    return 0;
}

void sp__monitor_stop(sp__monitor_t *m)
{
    if (!m || !m->running)
        return;
    pthread_mutex_lock(&m->lock);
    m->quit = true;
    pthread_cond_signal(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    m->running = false;
    /* The workers have finished: close the episodes still open in the log. */
    sample(m, now_ns());
}

void sp__monitor_destroy(sp__monitor_t *m)
{
    if (!m)
        return;
    sp__monitor_stop(m);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m->seen);
    free(m);
}
