/* spindle-bench monitor: what the blocking-code monitor costs the hot path.
 *
 * Two fibers on one worker (the calling thread, use_caller, so the _cpu
 * figures are the worker's) yield to each other (every yield is a task
 * switch through the worker loop, where a monitored worker publishes the
 * fiber it runs); the same run with the monitor off and on
 * (stall_us = SP_MONITOR_DEFAULT_STALL_US), taking turns. Reported per
 * yield; `monitor.on_vs_off` is the ratio.
 *
 * Run as `spindle-bench monitor [yields]`.
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdio.h>

static _Atomic long left;

static void yielder(void *arg)
{
    (void)arg;
    while (atomic_fetch_sub_explicit(&left, 1, memory_order_relaxed) > 0)
        sp_yield();
}

static double run(void *ctx, long iters)
{
    bool on = ctx != NULL;
    sp_scheduler_t *s = sp_scheduler_create("monitor-bench", 1, true);
    sp_monitor_opts_t o = {.stall_us = SP_MONITOR_DEFAULT_STALL_US};
    if (!s || (on && sp_scheduler_set_monitor(s, &o) != 0))
        return -1;
    atomic_store(&left, iters);
    double t0 = sb_now_ns();
    if (sp_schedule(s, yielder, NULL, 0) != 0 ||
        sp_schedule(s, yielder, NULL, 0) != 0 || sp_scheduler_start(s) != 0)
        return -1;
    if (sp_scheduler_stop(s) != 0)
        return -1;
    double t = sb_now_ns() - t0;
    sp_scheduler_destroy(s);
    return t;
}

int sb_monitor(long yields)
{
    static int on = 1;
    void *const ctx[2] = {NULL, &on};
    sb_best_t best[2];
    if (sb_best_of_each(run, ctx, 2, yields, 5, best) != 0) {
        sb_note("monitor bench: no scheduler");
        return 1;
    }
    sb_report_best("monitor", "off", &best[0], (double)yields, NULL, NULL);
    sb_report_best("monitor", "on", &best[1], (double)yields, &best[0], "off");
    return 0;
}
