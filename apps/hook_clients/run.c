/* N fibers on one worker, and the stall watcher; see run.h and clients.h. */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/debug.h>
#include <spindle/hook.h>
#include <spindle/iomanager.h>
#include <spindle/timer.h>

/* How long the stall watcher waits for every request to park. */
#define STALL_WAIT_NS (20ull * 1000000000ull)

double hc_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* Every fiber runs on the one worker, so this needs no lock; the caller
 * reads out after sp_iomanager_stop() joined that worker. */
typedef struct run_state {
    const hc_run_t *run;
    int fibers;
    int in_flight; /* requests started and not finished */
} run_state_t;

typedef struct job {
    run_state_t *state;
    int index;
} job_t;

static void request_fiber(void *arg)
{
    const job_t *j = arg;
    run_state_t *st = j->state;
    hc_result_t *out = st->run->out;
    char err[160] = ""; /* fits in out->error after "fiber N: " */
    if (++st->in_flight > out->peak_in_flight)
        out->peak_in_flight = st->in_flight;
    uint64_t t0 = sp_now_ns();
    bool ok = st->run->request(st->run, j->index, err, sizeof err);
    uint64_t took = sp_now_ns() - t0;
    st->in_flight--;
    if (out->min_ns == 0 || took < out->min_ns)
        out->min_ns = took;
    if (took > out->max_ns)
        out->max_ns = took;
    if (ok)
        out->ok++;
    else if (!out->error[0])
        snprintf(out->error, sizeof out->error, "fiber %d: %s", j->index, err);
    out->hooked = sp_hook_available();
}

/* The stall watcher, a fiber on the same worker as the requests: the
 * server is stopped, so no request can finish; once every one of them has
 * started and that many fibers are parked, the worker is demonstrably free
 * (this fiber runs on it) while all requests wait on the server. Then it
 * lets the server go on. It resumes the server after STALL_WAIT_NS in any
 * case, with out->stalled false. */
static void stall_fiber(void *arg)
{
    run_state_t *st = arg;
    const hc_stall_t *stall = st->run->stall;
    uint64_t deadline = sp_now_ns() + STALL_WAIT_NS;
    while (sp_now_ns() < deadline) {
        sp_fibers_count_t c;
        if (st->in_flight == st->fibers && sp_fibers_count(&c) == 0 &&
            c.parked >= (size_t)st->fibers) {
            st->run->out->stalled = true;
            break;
        }
        sp_sleep_us(1000);
    }
    stall->resume(stall->arg);
}

static int schedule_all(sp_iomanager_t *io, run_state_t *st, job_t *jobs)
{
    hc_result_t *out = st->run->out;
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    int rc = st->run->stall ? sp_schedule(s, stall_fiber, st, 0) : 0;
    for (int i = 0; i < st->fibers && rc == 0; i++) {
        jobs[i] = (job_t){st, i};
        rc = sp_schedule(s, request_fiber, &jobs[i], 0);
        if (rc == 0)
            out->fibers++;
    }
    if (rc < 0)
        snprintf(out->error, sizeof out->error, "sp_schedule: %s", strerror(-rc));
    return rc;
}

int hc_run_fibers(const hc_run_t *r, int fibers)
{
    hc_result_t *out = r->out;
    memset(out, 0, sizeof *out);
    if (fibers < 1) {
        snprintf(out->error, sizeof out->error, "need at least one fiber");
        return -EINVAL;
    }
    run_state_t st = {r, fibers, 0};
    job_t *jobs = calloc((size_t)fibers, sizeof *jobs);
    sp_iomanager_t *io = jobs ? sp_iomanager_create("hook-clients", 1, false) : NULL;
    int rc = io ? sp_iomanager_start(io) : -errno;
    if (rc < 0) {
        snprintf(out->error, sizeof out->error, "starting the IOManager: %s",
                 strerror(-rc));
        if (io)
            sp_iomanager_destroy(io);
        free(jobs);
        return rc;
    }
    uint64_t t0 = sp_now_ns();
    rc = schedule_all(io, &st, jobs);
    sp_iomanager_stop(io);
    out->wall_ns = sp_now_ns() - t0;
    sp_iomanager_destroy(io);
    free(jobs);
    return rc;
}
