/* spindle-bench sync: costs of the sync primitives, each next to the
 * baseline it should be judged against, measured in the same run.
 *
 *   mutex_uncontended       lock+unlock in a fiber     vs pthread_mutex
 *   chan_handoff            one item between two fibers on one worker
 *                           (half a ping-pong on two unbuffered channels)
 *                           vs yield_handoff (sp_yield between the same
 *                           two fibers) and fiber_switch_pair (raw
 *                           resume + yield)
 *   mutex_contended_2w      one fiber per worker, 2 workers, tiny critical
 *                           section; barging (default) vs hand-off (fair)
 *                           vs two threads on a pthread_mutex
 *
 * Run as `spindle-bench sync [iterations]`.
 * Prints `name value unit` lines on stdout; returns 0, or 1 when it could
 * not measure. Linked against spindle_static: it flips the internal
 * hand-off switch of the mutex for the comparison.
 */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include <spindle/fiber.h>
#include <spindle/scheduler.h>
#include <spindle/sync.h>
#include <spindle/timer.h>


/* sync_mutex.c: always hand the mutex over (no barging). */
void sp__mutex_set_fair(sp_mutex_t *m, bool fair);

enum { REPS = 5 };

static void report(const char *name, double value, const char *unit)
{
    printf("%s %.1f %s\n", name, value, unit);
}

static double now(void)
{
    return (double)sp_now_ns();
}

static uint64_t last_switches; /* of the last run_tasks() */

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

/* Runs `per_worker` tasks fn(arg) on each of `threads` workers and returns
 * the wall time; last_switches counts the switches into task fibers. */
static double run_tasks(int threads, int per_worker, sp_fiber_fn fn,
                        void *arg)
{
    sp_scheduler_t *s = sp_scheduler_create("sync-bench", threads, false);
    if (!s || sp_scheduler_start(s) != 0) {
        fprintf(stderr, "sync bench: no scheduler\n");
        exit(1);
    }
    double t0 = now();
    for (int w = 0; w < threads; w++)
        for (int i = 0; i < per_worker; i++)
            if (sp_schedule(s, fn, arg, w) != 0)
                exit(1);
    sp_scheduler_stop(s);
    double t = now() - t0;
    last_switches = 0;
    for (int w = 0; w < threads; w++) {
        sp_worker_stats_t st;
        if (sp_scheduler_stats(s, w, &st) == 0)
            last_switches += st.switches;
    }
    sp_scheduler_destroy(s);
    return t;
}

/* ---- uncontended ------------------------------------------------------ */

static long iters;
static sp_mutex_t *mx;
static double fiber_ns;

static void uncontended_fiber(void *arg)
{
    (void)arg;
    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            sp_mutex_lock(mx);
            sp_mutex_unlock(mx);
        }
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    fiber_ns = best / (double)iters;
}

static double pthread_uncontended(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best / (double)iters;
}

/* ---- hand-off between two fibers on one worker ------------------------- */

static sp_chan_t *ping, *pong;
static _Atomic long yields_left;

static void chan_pinger(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        long v = i;
        sp_chan_send(ping, &v, SP_FOREVER);
        sp_chan_recv(pong, &v, SP_FOREVER);
    }
}

static void chan_ponger(void *arg)
{
    (void)arg;
    long v;
    for (long i = 0; i < iters; i++) {
        sp_chan_recv(ping, &v, SP_FOREVER);
        sp_chan_send(pong, &v, SP_FOREVER);
    }
}

static void start_pair(void *arg)
{
    /* Both on this worker; the measured loop is everything after. */
    sp_fiber_fn *fns = arg;
    sp_scheduler_t *s = sp_scheduler_current();
    sp_schedule(s, fns[0], NULL, 0);
    sp_schedule(s, fns[1], NULL, 0);
}

static void yielder(void *arg)
{
    (void)arg;
    while (atomic_fetch_sub_explicit(&yields_left, 1, memory_order_relaxed) > 0)
        sp_yield();
}

static double best_pair(sp_fiber_fn a, sp_fiber_fn b)
{
    sp_fiber_fn fns[2] = {a, b};
    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        atomic_store(&yields_left, 2 * iters);
        double t = run_tasks(1, 1, start_pair, fns);
        if (t < best)
            best = t;
    }
    return best;
}

static void bouncer(void *arg)
{
    (void)arg;
    for (;;)
        sp_fiber_yield();
}

static double switch_pair_ns(void)
{
    sp_fiber_t *f = sp_fiber_create(bouncer, NULL, 0, "bounce");
    if (!f)
        return -1;
    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++)
            sp_fiber_resume(f);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    sp_fiber_destroy(f); /* suspended: abandoned without unwinding */
    return best / (double)iters;
}

/* ---- contended across two workers --------------------------------------- */

static long shared_counter;
static pthread_mutex_t pmx = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int arrived;

/* Both contenders start together, or one may finish before the other
 * begins and nothing is contended. A short spin: this is a benchmark. */
static void start_line(void)
{
    atomic_fetch_add(&arrived, 1);
    while (atomic_load(&arrived) < 2)
        ;
}

static void contended_fiber(void *arg)
{
    (void)arg;
    start_line();
    for (long i = 0; i < iters; i++) {
        sp_mutex_lock(mx);
        shared_counter++;
        sp_mutex_unlock(mx);
    }
}

static void *contended_thread(void *arg)
{
    (void)arg;
    start_line();
    for (long i = 0; i < iters; i++) {
        pthread_mutex_lock(&pmx);
        shared_counter++;
        pthread_mutex_unlock(&pmx);
    }
    return NULL;
}

/* Median, not best: the least contended run is not the interesting one.
 * *switches: task switches per 1000 lock operations (2 = no contention:
 * each fiber is switched in once), the median run's. */
static double contended_sp(bool fair, double *switches)
{
    double t[REPS], sw[REPS];
    for (int r = 0; r < REPS; r++) {
        sp__mutex_set_fair(mx, fair);
        shared_counter = 0;
        atomic_store(&arrived, 0);
        t[r] = run_tasks(2, 1, contended_fiber, NULL);
        sw[r] = (double)last_switches * 1000.0 / (double)(2 * iters);
        if (shared_counter != 2 * iters) {
            fprintf(stderr, "sync bench: mutex lost updates\n");
            exit(1);
        }
    }
    *switches = median(sw, REPS);
    return median(t, REPS) / (double)(2 * iters);
}

static double contended_pthread(void)
{
    double el[REPS];
    for (int r = 0; r < REPS; r++) {
        pthread_t t[2];
        shared_counter = 0;
        atomic_store(&arrived, 0);
        double t0 = now();
        for (int i = 0; i < 2; i++)
            if (pthread_create(&t[i], NULL, contended_thread, NULL) != 0)
                return -1;
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        el[r] = now() - t0;
    }
    return median(el, REPS) / (double)(2 * iters);
}

int sb_sync(long n)
{
    mx = sp_mutex_create();
    ping = sp_chan_create(sizeof(long), 0);
    pong = sp_chan_create(sizeof(long), 0);
    if (!mx || !ping || !pong) {
        fprintf(stderr, "sync bench: out of memory\n");
        return 1;
    }

    iters = n;
    run_tasks(1, 1, uncontended_fiber, NULL);
    report("mutex_uncontended", fiber_ns, "ns");
    report("pthread_mutex_uncontended", pthread_uncontended(), "ns");

    iters = n / 4 > 0 ? n / 4 : 1;
    /* One round trip = two hand-offs, each a switch out of one fiber and
     * into the other through the worker. */
    double chan = best_pair(chan_pinger, chan_ponger);
    double yield = best_pair(yielder, yielder);
    report("chan_handoff", chan / (double)(2 * iters), "ns");
    report("yield_handoff", yield / (double)(2 * iters), "ns");
    report("fiber_switch_pair", switch_pair_ns(), "ns");

    iters = n / 2 > 0 ? n / 2 : 1;
    double sw;
    report("mutex_contended_2w_barging", contended_sp(false, &sw), "ns/op");
    report("mutex_contended_2w_barging_switches", sw, "per_1000_ops");
    report("mutex_contended_2w_handoff", contended_sp(true, &sw), "ns/op");
    report("mutex_contended_2w_handoff_switches", sw, "per_1000_ops");
    report("pthread_mutex_contended_2t", contended_pthread(), "ns/op");

    sp_chan_destroy(ping);
    sp_chan_destroy(pong);
    sp_mutex_destroy(mx);
    return 0;
}
