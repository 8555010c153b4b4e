/* spawn: nanoseconds per function task spawned, run and finished on one
 * worker (1 thread, use_caller, so everything runs inside stop() on this
 * thread and nothing else competes for the CPU).
 *
 * Two shapes:
 *  - batch: the caller queues every task, then stop() runs them. Reported
 *    as the submit and run halves and their sum.
 *  - chain: each task schedules the next from inside the worker, so the
 *    queue never holds more than one task (the fan-out of a server that
 *    spawns per connection, minus the I/O).
 */
#include "bench.h"

#include <string.h>

static void noop_task(void *arg)
{
    (void)arg;
}

/* Returns 0 and fills ns[0] (submit) and ns[1] (run) in total ns, or 1. */
static int spawn_batch(long n, double ns[2])
{
    sp_scheduler_t *s = sb_sched_new("spawn", 1, true);
    double t0 = sb_now_ns();
    for (long i = 0; i < n; i++) {
        int rc = sp_schedule(s, noop_task, NULL, SP_ANY_WORKER);
        if (rc < 0) {
            sb_note("spawn: sp_schedule failed after %ld tasks: %s", i,
                    strerror(-rc));
            sb_sched_end(s);
            return 1;
        }
    }
    double t1 = sb_now_ns();
    int rc = sb_sched_end(s);
    double t2 = sb_now_ns();
    ns[0] = t1 - t0;
    ns[1] = t2 - t1;
    return rc < 0;
}

typedef struct chain {
    sp_scheduler_t *s;
    long left; /* only the single worker touches it: no atomics needed */
    int err;
} chain_t;

static void chain_task(void *arg)
{
    chain_t *c = arg;
    if (--c->left > 0) {
        int rc = sp_schedule(c->s, chain_task, c, SP_ANY_WORKER);
        if (rc < 0)
            c->err = rc;
    }
}

static int spawn_chain(long n)
{
    chain_t c = {.s = sb_sched_new("chain", 1, true), .left = n};
    double t0 = sb_now_ns();
    int rc = sp_schedule(c.s, chain_task, &c, SP_ANY_WORKER);
    int stop_rc = sb_sched_end(c.s);
    rc = rc < 0 ? rc : stop_rc;
    double t1 = sb_now_ns();
    if (rc < 0 || c.err < 0) {
        sb_note("spawn: chain stopped with %ld tasks left: %s", c.left,
                strerror(rc < 0 ? -rc : -c.err));
        return 1;
    }
    sb_report("spawn.chain", (t1 - t0) / (double)n, "ns");
    return 0;
}

int sb_spawn(long tasks)
{
    sb_note("spawn: %ld noop tasks, 1 worker (use_caller)", tasks);
    /* A first small round maps the stack pool and warms the caches, so
     * both shapes below start from the same state. */
    double ns[2];
    spawn_batch(1000, ns);
    int bad = spawn_batch(tasks, ns);
    if (!bad) {
        sb_report("spawn.batch_submit", ns[0] / (double)tasks, "ns");
        sb_report("spawn.batch_run", ns[1] / (double)tasks, "ns");
        sb_report("spawn.batch", (ns[0] + ns[1]) / (double)tasks, "ns");
    }
    return bad | spawn_chain(tasks);
}
