/* timers: insert N one-shot timers, then cancel them all.
 *
 * Delays are spread pseudo-randomly (fixed seed) over 1..1000 s, so none
 * fires during the run and each insert lands at a random depth of the
 * worker's heap, as connection timeouts would. Cancels go in insertion
 * order, i.e. at random heap positions.
 *
 *  - fiber: from a task on a one-worker IOManager (use_caller), the
 *    timers go to that worker's own heap.
 *  - thread: from a plain thread while the IOManager's one worker sleeps;
 *    an insert that becomes the earliest deadline wakes the worker so it
 *    re-arms its loop.
 *
 * Each is one run on a fresh IOManager, so the heap's growth is included.
 * Times are wall clock, plus the adding thread's CPU time for the total.
 */
#include "bench.h"

#include <errno.h>
#include <spindle/timer.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct timer_run {
    sp_iomanager_t *io; /* NULL: the calling worker's */
    long n;
    double add_ns, cancel_ns;
    double cpu_ns; /* this thread's CPU time for both */
    int err;
} timer_run_t;

static void never(void *arg)
{
    (void)arg;
}

static void add_and_cancel(void *arg)
{
    timer_run_t *r = arg;
    sp_timer_id_t *ids = malloc(sizeof *ids * (size_t)r->n);
    if (!ids) {
        r->err = -ENOMEM;
        return;
    }
    uint64_t x = 0x9e3779b97f4a7c15u; /* LCG state, fixed seed */
    double cpu0 = sb_thread_cpu_ns();
    double t0 = sb_now_ns();
    for (long i = 0; i < r->n && !r->err; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        uint64_t delay_us = 1000000u + (x >> 33) % 999000001u;
        r->err = sp_timer_add(r->io, delay_us, never, NULL, 0, NULL, &ids[i]);
    }
    double t1 = sb_now_ns();
    for (long i = 0; i < r->n && !r->err; i++)
        r->err = sp_timer_cancel(r->io, ids[i]);
    double t2 = sb_now_ns();
    r->cpu_ns = sb_thread_cpu_ns() - cpu0;
    free(ids);
    r->add_ns = t1 - t0;
    r->cancel_ns = t2 - t1;
}

static int report(const char *where, const timer_run_t *r)
{
    if (r->err) {
        sb_note("timers: %s: %s", where, strerror(-r->err));
        return 1;
    }
    char name[64];
    snprintf(name, sizeof name, "timers.%s_total", where);
    sb_report(name, (r->add_ns + r->cancel_ns) / 1e9, "s");
    snprintf(name, sizeof name, "timers.%s_total_cpu", where);
    sb_report(name, r->cpu_ns / 1e9, "s");
    snprintf(name, sizeof name, "timers.%s_insert", where);
    sb_report(name, r->add_ns / (double)r->n, "ns");
    snprintf(name, sizeof name, "timers.%s_cancel", where);
    sb_report(name, r->cancel_ns / (double)r->n, "ns");
    return 0;
}

int sb_timers(long n)
{
    sb_note("timers: %ld one-shot timers, delays 1..1000 s, inserted then "
            "cancelled; one worker",
            n);
    timer_run_t fiber = {.n = n};
    int bad = sb_iom_run("timers", add_and_cancel, &fiber, 0, 1);
    bad |= report("fiber", &fiber);

    timer_run_t thread = {.n = n};
    thread.io = sb_iom_new("timers", 1, false);
    add_and_cancel(&thread);
    bad |= sb_iom_end(thread.io) < 0;
    bad |= report("thread", &thread);
    return bad;
}
