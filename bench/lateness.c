/* lateness: how late sleeps end, fibers against a plain thread.
 *
 * N fibers on ONE worker (the calling thread, use_caller) sleep in a loop
 * with clock_nanosleep(CLOCK_MONOTONIC), which the hooks turn into a timer
 * wait; each sleep is a pseudo-random length in a range. In the same run
 * a plain thread sleeps 50-1000 µs at a time with the kernel's
 * clock_nanosleep (its default 50 µs timer slack included). Lateness is
 * the time a sleep returned after its requested length; the figures are
 * its p50 and p99 for both, the fibers' p50 over the thread's and how
 * many sleeps ended early (must be 0); and the share of the run the
 * worker spent on the CPU.
 *
 * Two runs: one fiber (the precision of an idle worker's timer), then N
 * fibers. The sleeps' range grows with N so that one worker keeps up: N
 * fibers sleeping 50-1000 µs ask for about N * 1900 wake-ups a second
 * (19 million for 10,000), and each wake-up of the sleeping worker costs
 * it about 14 µs of CPU on a VM (system calls, kernel switches). So
 * 50-1000 µs up to 20 fibers, scaled by N / 20 beyond (25-500 ms for
 * 10,000: about 38,000 wake-ups a second). The thread keeps 50-1000 µs:
 * a kernel sleep's lateness does not depend on its length, and it gets
 * more samples that way.
 */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { RUN_SECONDS = 3, MAX_SAMPLES = 1 << 21 };

typedef struct samples {
    double *v;
    long n;
    long early;
} samples_t;

typedef struct range {
    uint64_t min_ns, span_ns;
} range_t;

typedef struct late_run {
    double end_ns; /* every sleeper stops after this */
    range_t fibers, thread;
    samples_t fiber_late, thread_late;
    _Atomic long failed; /* the fibers' and the thread's */
} late_run_t;

static void note_sample(samples_t *s, double late)
{
    if (late < 0)
        s->early++;
    if (s->n < MAX_SAMPLES)
        s->v[s->n++] = late;
}

static uint64_t next_len(const range_t *r, uint64_t *seed)
{
    *seed = *seed * 6364136223846793005u + 1442695040888963407u;
    return r->min_ns + (*seed >> 33) % r->span_ns;
}

/* Sleep until end_ns, noting each sleep's lateness; false on a failure. */
static bool sleep_loop(const late_run_t *r, const range_t *len, samples_t *s,
                       uint64_t seed)
{
    while (sb_now_ns() < r->end_ns) {
        uint64_t ns = next_len(len, &seed);
        struct timespec req = {(time_t)(ns / 1000000000u),
                               (long)(ns % 1000000000u)};
        double t0 = sb_now_ns();
        if (clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL) != 0)
            return false;
        note_sample(s, sb_now_ns() - t0 - (double)ns);
    }
    return true;
}

/* The fibers share one worker: plain fields are enough. */
static void fiber_sleeper(void *arg)
{
    late_run_t *r = arg;
    static uint64_t seeds;
    if (!sleep_loop(r, &r->fibers, &r->fiber_late, ++seeds * 0x9e3779b97f4a7c15u))
        atomic_fetch_add(&r->failed, 1);
}

static void *thread_sleeper(void *arg)
{
    late_run_t *r = arg;
    if (!sleep_loop(r, &r->thread, &r->thread_late, 42))
        atomic_fetch_add(&r->failed, 1);
    return NULL;
}

static void report(const char *name, samples_t *s)
{
    char fig[64];
    snprintf(fig, sizeof fig, "lateness.%s_p50", name);
    sb_report(fig, sb_percentile(s->v, s->n, 50) / 1e3, "us");
    snprintf(fig, sizeof fig, "lateness.%s_p99", name);
    sb_report(fig, sb_percentile(s->v, s->n, 99) / 1e3, "us");
    snprintf(fig, sizeof fig, "lateness.%s_early", name);
    sb_report(fig, (double)s->early, "sleeps");
    snprintf(fig, sizeof fig, "lateness.%s_samples", name);
    sb_report(fig, (double)s->n, "sleeps");
}

/* One run of `fibers` sleepers beside the thread; 0 or 1. */
static int run(const char *name, long fibers)
{
    double scale = fibers > 20 ? (double)fibers / 20 : 1;
    late_run_t r = {.fibers = {(uint64_t)(50000 * scale), (uint64_t)(950000 * scale)},
                    .thread = {50000, 950000}};
    r.fiber_late.v = malloc(sizeof(double) * MAX_SAMPLES);
    r.thread_late.v = malloc(sizeof(double) * MAX_SAMPLES);
    pthread_t th;
    int bad = !r.fiber_late.v || !r.thread_late.v;
    r.end_ns = sb_now_ns() + RUN_SECONDS * 1e9;
    if (!bad && (errno = pthread_create(&th, NULL, thread_sleeper, &r)) != 0) {
        sb_note("lateness: pthread_create: %s", strerror(errno));
        bad = 1;
    }
    /* The calling thread is the worker: its CPU time is the worker's. */
    double cpu0 = sb_thread_cpu_ns(), t0 = sb_now_ns();
    if (!bad) {
        bad = sb_iom_run("lateness", fiber_sleeper, &r, 0, fibers);
        pthread_join(th, NULL);
    }
    double busy = (sb_thread_cpu_ns() - cpu0) / (sb_now_ns() - t0) * 100;
    if (!bad && (atomic_load(&r.failed) || !r.fiber_late.n || !r.thread_late.n)) {
        sb_note("lateness: %ld sleepers failed", atomic_load(&r.failed));
        bad = 1;
    }
    if (!bad) {
        sb_note("lateness %s: %ld fibers, sleeps of %.0f-%.0f us", name,
                fibers, r.fibers.min_ns / 1e3,
                (r.fibers.min_ns + r.fibers.span_ns) / 1e3);
        char fig[64];
        snprintf(fig, sizeof fig, "%s_fiber", name);
        report(fig, &r.fiber_late);
        snprintf(fig, sizeof fig, "%s_thread", name);
        double fp50 = sb_percentile(r.fiber_late.v, r.fiber_late.n, 50);
        double tp50 = sb_percentile(r.thread_late.v, r.thread_late.n, 50);
        report(fig, &r.thread_late);
        snprintf(fig, sizeof fig, "lateness.%s_p50_fiber_vs_thread", name);
        sb_report(fig, fp50 / tp50, "x");
        snprintf(fig, sizeof fig, "lateness.%s_worker_busy", name);
        sb_report(fig, busy, "%");
    }
    free(r.fiber_late.v);
    free(r.thread_late.v);
    return bad;
}

int sb_lateness(long fibers)
{
    return run("one", 1) | run("many", fibers);
}
