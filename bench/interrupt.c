/* interrupt: cross-worker sp_fiber_interrupt round trips (task.h).
 *
 * The shape of `wake`: `ping` on worker 0 and `pong` on worker 1 take
 * turns, but each ends the other's sp_park() with an interrupt instead of
 * a wake, so a round trip is two interrupts of a parked fiber on another
 * thread. Next to it, the same with sp_wake, in the same run: the
 * difference is what an interrupt costs over a wake.
 */
#include "bench.h"

#include <errno.h>
#include <stdatomic.h>

#include <spindle/task.h>

typedef struct rally {
    _Atomic(sp_fiber_t *) ping, pong;
    long round_trips;
    bool by_wake;
    double elapsed_ns;
    _Atomic int bad;
} rally_t;

/* End the other side's park; its park's answer is checked on its side. */
static void hit(rally_t *r, sp_fiber_t *f)
{
    if ((r->by_wake ? sp_wake(f) : sp_fiber_interrupt(f, ECANCELED)) != 0)
        atomic_store(&r->bad, 1);
}

static void take(rally_t *r)
{
    if (sp_park() != (r->by_wake ? 0 : -ECANCELED))
        atomic_store(&r->bad, 1);
}

static int pong_task(void *arg)
{
    rally_t *r = arg;
    for (long i = 0; i < r->round_trips; i++) {
        take(r);
        hit(r, atomic_load(&r->ping));
    }
    return 0;
}

static int ping_task(void *arg)
{
    rally_t *r = arg;
    sp_fiber_t *pong;
    while (!(pong = atomic_load(&r->pong)))
        sp_yield(); /* pong has not started yet */
    double t0 = sb_now_ns();
    for (long i = 0; i < r->round_trips; i++) {
        hit(r, pong);
        take(r);
    }
    r->elapsed_ns = sb_now_ns() - t0;
    return 0;
}

/* One run; ns per round trip, or -1. */
static double rally(long round_trips, bool by_wake)
{
    rally_t r = {.round_trips = round_trips, .by_wake = by_wake};
    sp_scheduler_t *s = sb_sched_new("interrupt", 2, false);
    sp_fiber_t *ping = NULL, *pong = NULL;
    sp_task_opts_t on0 = {.name = "ping", .bound = true, .worker = 0};
    sp_task_opts_t on1 = {.name = "pong", .bound = true, .worker = 1};
    int rc = sp_go(s, pong_task, &r, &on1, &pong);
    if (rc == 0) {
        atomic_store(&r.pong, pong);
        rc = sp_go(s, ping_task, &r, &on0, &ping);
    }
    if (rc == 0)
        atomic_store(&r.ping, ping);
    int stop_rc = sb_sched_end(s);
    sp_fiber_unref(ping);
    sp_fiber_unref(pong);
    if (rc < 0 || stop_rc < 0 || atomic_load(&r.bad))
        return -1;
    return r.elapsed_ns / (double)round_trips;
}

int sb_interrupt(long round_trips)
{
    if (round_trips <= 0)
        return 1;
    double intr = rally(round_trips, false), wake = rally(round_trips, true);
    if (intr < 0 || wake < 0)
        return 1;
    sb_note("interrupt: %ld round trips between bound fibers on workers 0 and 1",
            round_trips);
    sb_report("interrupt.round_trip", intr, "ns");
    sb_report("interrupt.wake_round_trip", wake, "ns");
    return 0;
}
