/* sleepers: many fibers sleeping at once on ONE worker, with the libc
 * sleep calls the hooks turn into timer waits.
 *
 *  - N fibers each call sleep(1): all sleeps overlap, so the wall time
 *    should be one second plus the cost of starting, parking, waking and
 *    finishing N fibers.
 *  - 10 N fibers each call usleep(100000): the same at ten times the count
 *    and a tenth of the sleep.
 *
 * One worker that is the calling thread (use_caller): without the hooks
 * each of the two would take N seconds (1000 s for N = 1000).
 */
#include "bench.h"

#include <spindle/hook.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

/* All fibers run on the one worker thread, so plain fields are enough;
 * `failed` is atomic only to read it after stop() without a question. */
typedef struct sleep_run {
    unsigned usec; /* multiple of 1e6: sleep(), else usleep() */
    _Atomic long failed;
    /* Where a slow run lost its time: when the first and the last fiber
     * went to sleep (ns since t0), and the most any sleep overran. */
    double t0, first_ns, last_ns, max_late_ns;
} sleep_run_t;

static void sleeper(void *arg)
{
    sleep_run_t *r = arg;
    double start = sb_now_ns();
    int rc = r->usec % 1000000 == 0 ? (int)sleep(r->usec / 1000000)
                                    : usleep(r->usec);
    double late = sb_now_ns() - start - r->usec * 1e3;
    if (rc != 0)
        atomic_fetch_add(&r->failed, 1);
    if (r->first_ns == 0)
        r->first_ns = start - r->t0;
    r->last_ns = start - r->t0;
    if (late > r->max_late_ns)
        r->max_late_ns = late;
}

/* One run of `fibers` sleepers, reported as sleepers.NAME_*; 0 or 1. */
static int run(const char *name, long fibers, unsigned usec)
{
    sleep_run_t r = {.usec = usec, .t0 = sb_now_ns()};
    int bad = sb_iom_run("sleepers", sleeper, &r, 0, fibers);
    double wall = sb_now_ns() - r.t0;
    if (bad || atomic_load(&r.failed)) {
        sb_note("sleepers: %ld of %ld sleeps failed", atomic_load(&r.failed),
                fibers);
        return 1;
    }
    char fig[64];
    snprintf(fig, sizeof fig, "sleepers.%s_wall", name);
    sb_report(fig, wall / 1e9, "s");
    snprintf(fig, sizeof fig, "sleepers.%s_last_asleep", name);
    sb_report(fig, r.last_ns / 1e6, "ms");
    snprintf(fig, sizeof fig, "sleepers.%s_max_late", name);
    sb_report(fig, r.max_late_ns / 1e6, "ms");
    return 0;
}

int sb_sleepers(long fibers)
{
    if (!sp_hook_available()) {
        sb_note("sleepers: no hooks in this process: sleep() would block");
        return 1;
    }
    sb_note("sleepers: %ld fibers sleep(1), then %ld fibers usleep(100000), "
            "one worker; last_asleep: when the last fiber started to sleep; "
            "max_late: the longest overrun of a sleep",
            fibers, 10 * fibers);
    int bad = run("sleep1", fibers, 1000000);
    bad |= run("usleep100ms", 10 * fibers, 100000);
    return bad;
}
