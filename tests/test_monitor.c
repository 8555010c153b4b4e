/* Blocking-code monitor, worker growth and dispatch strategies. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/log.h>
#include <spindle/scheduler.h>
#include <spindle/timer.h>

#include "testutil.h"

enum { NJOBS = 100, NPINNED = 5, STALL_US = 50000, LIMIT_MS = 10000 };

/* ---- helpers ------------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];
static size_t log_len;

static void sink(const char *line, size_t len, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&log_lock);
    if (log_len + len < sizeof log_text) {
        memcpy(log_text + log_len, line, len);
        log_len += len;
        log_text[log_len] = '\0';
    }
    pthread_mutex_unlock(&log_lock);
}

/* Send the monitor's lines to `sink`. */
static void capture_monitor_log(void)
{
    sp_log_appender_t *a = sp_log_callback(sink, NULL, "%p %m%n");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(sp_logger_set_appenders(sp_logger("spindle.monitor"), &a, 1), 0);
    sp_log_appender_release(a);
}

static bool log_has(const char *needle)
{
    pthread_mutex_lock(&log_lock);
    bool yes = strstr(log_text, needle) != NULL;
    pthread_mutex_unlock(&log_lock);
    return yes;
}

/* Wait (bounded) for pred() to become true: an event, polled every ms. */
static bool wait_for(bool (*pred)(void), int ms)
{
    for (int i = 0; i < ms && !pred(); i++) {
        struct timespec ms1 = {0, 1000000};
        nanosleep(&ms1, NULL);
    }
    return pred();
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- a worker blocked in a raw syscall ---------------------------------- */

static sp_scheduler_t *sched;
static int fds[2];
static _Atomic int busy_running, all_done, blocker_returned;
static _Atomic int jobs_done, pinned_started, pinned_done, target;
static int done_at_return, pinned_at_return;
static char got;

static bool has_returned(void) { return atomic_load(&blocker_returned); }

static void job_finished(void)
{
    if (atomic_fetch_add(&jobs_done, 1) + 1 == atomic_load(&target)) {
        char c = 'Y';
        ck_assert_int_eq(syscall(SYS_write, fds[1], &c, 1), 1);
    }
}

static void job(void *arg)
{
    (void)arg;
    job_finished();
}

static void pinned(void *arg)
{
    (void)arg;
    atomic_fetch_add(&pinned_started, 1);
    sp_yield(); /* now a started fiber, queued on worker 0 */
    atomic_fetch_add(&pinned_done, 1);
    job_finished();
}

/* Keeps worker 1 busy: it never idles, so it never steals on its own. */
static void busy(void *arg)
{
    (void)arg;
    atomic_store(&busy_running, 1);
    while (!atomic_load(&all_done))
        sp_yield();
}

/* A blocking read the hooks never see: the worker thread is stuck until
 * job_finished (or the test's time limit) writes the pipe. */
static void block_worker(void)
{
    ck_assert_int_eq(syscall(SYS_read, fds[0], &got, 1), 1);
    done_at_return = atomic_load(&jobs_done);
    pinned_at_return = atomic_load(&pinned_done);
    atomic_store(&all_done, 1);
    atomic_store(&blocker_returned, 1);
}

static void blocker(void *arg)
{
    int npinned = (int)(long)arg;
    for (int i = 0; i < npinned; i++)
        ck_assert_int_eq(sp_schedule(sched, pinned, NULL, SP_ANY_WORKER), 0);
    sp_yield(); /* the pinned ones start and queue up behind us */
    ck_assert_int_eq(atomic_load(&pinned_started), npinned);
    for (int i = 0; i < NJOBS; i++) /* local-first: onto our own queue */
        ck_assert_int_eq(sp_schedule(sched, job, NULL, SP_ANY_WORKER), 0);
    block_worker();
}

/* Ends the blocked read with 'T' if it did not end by itself in time. */
static void unblock_after_limit(void)
{
    if (!wait_for(has_returned, LIMIT_MS)) {
        char c = 'T';
        ck_assert_int_eq(write(fds[1], &c, 1), 1);
    }
}

static bool is_busy_running(void) { return atomic_load(&busy_running); }

/* Runs the scenario on an IOManager with 2 workers; returns the blocker's
 * fiber id. The blocked read ends with 'Y' once the jobs (and with
 * migration the pinned fibers) finished, or with 'T' after LIMIT_MS. */
static uint64_t run_blocked(bool migrate)
{
    capture_monitor_log();
    ck_assert_int_eq(pipe(fds), 0);
    atomic_store(&target, NJOBS + (migrate ? NPINNED : 0));
    sp_iomanager_t *io = sp_iomanager_create("blocked", 2, false);
    sched = sp_iomanager_scheduler(io);
    sp_monitor_opts_t o = {.stall_us = STALL_US, .migrate_stuck = migrate};
    ck_assert_int_eq(sp_scheduler_set_monitor(sched, &o), 0);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    ck_assert_int_eq(sp_schedule(sched, busy, NULL, 1), 0);
    ck_assert(wait_for(is_busy_running, LIMIT_MS));
    sp_fiber_t *b = sp_fiber_create(blocker, (void *)(long)NPINNED, 0, "blocker");
    uint64_t id = sp_fiber_id(b);
    ck_assert_int_eq(sp_schedule_fiber(sched, b, 0), 0);
    unblock_after_limit();
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    ck_assert_int_eq(atomic_load(&pinned_done), NPINNED);
    sp_monitor_stats_t st;
    ck_assert_int_eq(sp_scheduler_monitor_stats(sched, &st), 0);
    ck_assert_uint_ge(st.stalls, 1);
    ck_assert_uint_eq(st.rescued, NJOBS);
    ck_assert_uint_eq(st.migrated, migrate ? NPINNED : 0);
    sp_iomanager_destroy(io);
    ck_assert_int_eq(sp_log_flush(), 0);
    char want[96];
    snprintf(want, sizeof want, "WARN blocked: worker 0 stuck for");
    ck_assert_msg(log_has(want), "log: %s", log_text);
    snprintf(want, sizeof want, "in fiber %" PRIu64 " (blocker)", id);
    ck_assert_msg(log_has(want), "log: %s", log_text);
    ck_assert_msg(log_has("worker 0 running again"), "log: %s", log_text);
    return id;
}

START_TEST(stuck_worker_queue_taken_by_busy_worker)
{
    run_blocked(false);
    /* The read ended because every queued task finished elsewhere, not
     * because the limit ran out. */
    ck_assert_int_eq(got, 'Y');
    ck_assert_int_eq(done_at_return, NJOBS);
    /* Started fibers stay on their worker unless migrate_stuck. */
    ck_assert_int_eq(pinned_at_return, 0);
}
END_TEST

START_TEST(migrate_stuck_moves_started_fibers)
{
    run_blocked(true);
    ck_assert_int_eq(got, 'Y');
    ck_assert_int_eq(done_at_return, NJOBS + NPINNED);
    ck_assert_int_eq(pinned_at_return, NPINNED);
}
END_TEST

/* ---- a CPU-bound fiber --------------------------------------------------- */

static _Atomic int spin_worker = -1, spin_over;

static void spinner(void *arg)
{
    (void)arg;
    atomic_store(&spin_worker, sp_worker_index());
    char want[64];
    snprintf(want, sizeof want, "in fiber %" PRIu64 " (spinner)",
             sp_fiber_id(sp_fiber_current()));
    double end = now_s() + LIMIT_MS / 1000.0;
    while (!log_has(want) && now_s() < end)
        ; /* no switch: the monitor must notice us */
    atomic_store(&spin_over, 1);
}

START_TEST(cpu_bound_fiber_reported)
{
    capture_monitor_log();
    sp_scheduler_t *s = sp_scheduler_create("cpu", 2, false);
    sp_monitor_opts_t o = {.stall_us = STALL_US};
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), 0);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    sp_fiber_t *f = sp_fiber_create(spinner, NULL, 0, "spinner");
    ck_assert_int_eq(sp_schedule_fiber(s, f, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    char want[64];
    snprintf(want, sizeof want, "worker %d stuck", atomic_load(&spin_worker));
    ck_assert_msg(log_has(want), "log: %s", log_text);
    ck_assert_msg(log_has("(spinner)"), "log: %s", log_text);
    sp_monitor_stats_t st;
    sp_scheduler_monitor_stats(s, &st);
    ck_assert_uint_eq(st.stalls, 1);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- growth and shrink --------------------------------------------------- */

static bool shrunk_back(void)
{
    sp_monitor_stats_t st;
    sp_scheduler_monitor_stats(sched, &st);
    return st.shrunk == 1 && st.threads == 1;
}

/* With `sched` (one base worker) created: grow up to 2 workers, start,
 * block worker 0 in fn's raw read and wait (bounded) until the jobs fn
 * queued behind it ended the read. */
static void block_and_grow(sp_fiber_fn fn)
{
    sp_monitor_opts_t o = {.stall_us = STALL_US, .max_threads = 2,
                           .shrink_after_us = 100000};
    ck_assert_int_eq(sp_scheduler_set_monitor(sched, &o), 0);
    ck_assert_int_eq(sp_scheduler_start(sched), 0);
    sp_fiber_t *b = sp_fiber_create(fn, NULL, 0, "blocker");
    ck_assert_int_eq(sp_schedule_fiber(sched, b, 0), 0);
    unblock_after_limit();
    /* The only base worker was stuck: an extra one ran the jobs. */
    ck_assert_int_eq(got, 'Y');
}

START_TEST(grows_while_stuck_and_shrinks_back)
{
    capture_monitor_log();
    ck_assert_int_eq(pipe(fds), 0);
    atomic_store(&target, NJOBS);
    sched = sp_scheduler_create("grow", 1, false);
    block_and_grow(blocker);
    ck_assert_int_eq(done_at_return, NJOBS);
    ck_assert(wait_for(shrunk_back, LIMIT_MS));
    /* Back to one worker, and work still runs. */
    atomic_store(&target, 0);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(sp_schedule(sched, job, NULL, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_scheduler_stop(sched), 0);
    ck_assert_int_eq(atomic_load(&jobs_done), NJOBS + 10);
    sp_worker_stats_t ws;
    ck_assert_int_eq(sp_scheduler_stats(sched, 1, &ws), 0);
    ck_assert_uint_ge(ws.tasks_run, NJOBS);
    sp_monitor_stats_t st;
    sp_scheduler_monitor_stats(sched, &st);
    ck_assert_uint_eq(st.grown, 1);
    ck_assert_uint_eq(st.shrunk, 1);
    sp_scheduler_destroy(sched);
    sp_log_flush();
    ck_assert_msg(log_has("started extra worker 1"), "log: %s", log_text);
    ck_assert_msg(log_has("extra worker 1 retired"), "log: %s", log_text);
}
END_TEST

/* ---- growth and shrink on an IOManager ------------------------------------ */

enum { NPINGS = 20 };

/* A ping through the hooks on a blocking socketpair: each side waits on
 * its fd (an fd wait on the worker it runs on) for the other's byte. */
typedef struct ping {
    int fd[2];
    bool keep; /* the test's pair: stays open, its watches idle */
} ping_t;

static ping_t pings[NPINGS];
static _Atomic int pings_on_extra;

static void pong(void *arg)
{
    ping_t *p = arg;
    char c = 'p';
    ck_assert_int_eq(write(p->fd[1], &c, 1), 1);
    ck_assert_int_eq(read(p->fd[1], &c, 1), 1);
    ck_assert_int_eq(c, 'q');
    c = 'r';
    ck_assert_int_eq(write(p->fd[1], &c, 1), 1);
    if (!p->keep)
        close(p->fd[1]);
}

static void ping(void *arg)
{
    ping_t *p = arg;
    if (sp_worker_index() == 1)
        atomic_fetch_add(&pings_on_extra, 1);
    ck_assert_int_eq(sp_sleep_us(1000), 0); /* a timer on this worker */
    if (!p->keep)
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
    ck_assert_int_eq(sp_schedule(sched, pong, p, SP_ANY_WORKER), 0);
    char c;
    ck_assert_int_eq(read(p->fd[0], &c, 1), 1); /* waits for pong */
    ck_assert_int_eq(c, 'p');
    c = 'q';
    ck_assert_int_eq(write(p->fd[0], &c, 1), 1);
    ck_assert_int_eq(read(p->fd[0], &c, 1), 1);
    ck_assert_int_eq(c, 'r');
    if (!p->keep)
        close(p->fd[0]);
    job_finished();
}

static void ping_blocker(void *arg)
{
    (void)arg;
    for (int i = 0; i < NPINGS; i++) /* local-first: onto our own queue */
        ck_assert_int_eq(sp_schedule(sched, ping, &pings[i], SP_ANY_WORKER), 0);
    block_worker();
}

START_TEST(iomanager_grows_while_stuck_and_shrinks_back)
{
    capture_monitor_log();
    ck_assert_int_eq(pipe(fds), 0);
    atomic_store(&target, NPINGS);
    pings[0].keep = true;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, pings[0].fd), 0);
    sp_iomanager_t *io = sp_iomanager_create("grow-io", 1, false);
    sched = sp_iomanager_scheduler(io);
    block_and_grow(ping_blocker);
    /* The extra worker ran every ping, with its own loop and heap. */
    ck_assert_int_eq(done_at_return, NPINGS);
    ck_assert_int_eq(atomic_load(&pings_on_extra), NPINGS);
    /* It retires once idle, though the kept pair's watches were its. */
    ck_assert(wait_for(shrunk_back, LIMIT_MS));
    /* One worker again: the kept pair pings on worker 0 (new watches). */
    atomic_store(&target, 0);
    ck_assert_int_eq(sp_schedule(sched, ping, &pings[0], SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    ck_assert_int_eq(atomic_load(&jobs_done), NPINGS + 1);
    ck_assert_int_eq(atomic_load(&pings_on_extra), NPINGS);
    sp_monitor_stats_t st;
    sp_scheduler_monitor_stats(sched, &st);
    ck_assert_uint_eq(st.grown, 1);
    ck_assert_uint_eq(st.shrunk, 1);
    sp_iomanager_destroy(io);
    close(pings[0].fd[0]);
    close(pings[0].fd[1]);
    sp_log_flush();
    ck_assert_msg(log_has("started extra worker 1"), "log: %s", log_text);
    ck_assert_msg(log_has("extra worker 1 retired"), "log: %s", log_text);
}
END_TEST

/* ---- dispatch strategies ------------------------------------------------- */

/* Both workers are held by a bound task while probes are placed, so none
 * is stolen before the placement is counted; after the release stealing
 * may move probes, and the steal counters undo that:
 * placed on 0 = ran on 0 - stolen by 0 + stolen by 1. */
static _Atomic int held, release_holders, ran_on[2];
static int submit_from; /* worker whose holder submits, or -1 */
static int nprobes;

static void probe(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran_on[sp_worker_index()], 1);
}

static void filler(void *arg)
{
    (void)arg;
}

static void holder(void *arg)
{
    int me = (int)(long)arg;
    if (me == submit_from)
        for (int i = 0; i < nprobes; i++)
            ck_assert_int_eq(sp_schedule(sched, probe, NULL, SP_ANY_WORKER), 0);
    atomic_fetch_add(&held, 1);
    while (!atomic_load(&release_holders))
        ; /* hold the worker: it must not idle and steal yet */
}

static bool both_held(void) { return atomic_load(&held) == 2; }

/* Returns how many probes were placed on worker 0. */
static int place(sp_dispatch_t d, int from, int n, int fill0)
{
    sched = sp_scheduler_create("dispatch", 2, false);
    ck_assert_int_eq(sp_scheduler_set_dispatch(sched, d), 0);
    submit_from = from;
    nprobes = n;
    ck_assert_int_eq(sp_scheduler_start(sched), 0);
    ck_assert_int_eq(sp_scheduler_set_dispatch(sched, d), -EBUSY);
    ck_assert_int_eq(sp_schedule(sched, holder, (void *)0L, 0), 0);
    ck_assert_int_eq(sp_schedule(sched, holder, (void *)1L, 1), 0);
    ck_assert(wait_for(both_held, LIMIT_MS));
    for (int i = 0; i < fill0; i++) /* worker 0's queue gets longer */
        ck_assert_int_eq(sp_schedule(sched, filler, NULL, 0), 0);
    if (from < 0)
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(sp_schedule(sched, probe, NULL, SP_ANY_WORKER), 0);
    atomic_store(&release_holders, 1);
    ck_assert_int_eq(sp_scheduler_stop(sched), 0);
    sp_worker_stats_t w0, w1;
    sp_scheduler_stats(sched, 0, &w0);
    sp_scheduler_stats(sched, 1, &w1);
    sp_scheduler_destroy(sched);
    ck_assert_int_eq(atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]), n);
    return atomic_load(&ran_on[0]) - (int)w0.steals + (int)w1.steals;
}

/* strategy, submitting worker (-1: the test thread), probes, tasks queued
 * on worker 0 first, probes expected on worker 0. */
static const struct placement {
    sp_dispatch_t d;
    int from, n, fill0, on0;
} placements[] = {
    {SP_DISPATCH_LOCAL_FIRST, 1, 20, 0, 0},    /* all on the submitter's */
    {SP_DISPATCH_LOCAL_FIRST, -1, 20, 0, 10},  /* outside: round-robin */
    {SP_DISPATCH_ROUND_ROBIN, 1, 20, 0, 10},   /* even from a worker */
    /* Worker 0 has 10 queued: the first 10 probes go to worker 1, then
     * they alternate. */
    {SP_DISPATCH_LEAST_LOADED, -1, 20, 10, 5},
};

START_TEST(dispatch_placement)
{
    const struct placement *p = &placements[_i];
    ck_assert_int_eq(place(p->d, p->from, p->n, p->fill0), p->on0);
}
END_TEST

/* ---- configuration errors ------------------------------------------------ */

START_TEST(bad_configuration)
{
    sp_scheduler_t *s = sp_scheduler_create("cfg", 2, false);
    sp_monitor_opts_t o = {.stall_us = 0};
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), -EINVAL);
    o = (sp_monitor_opts_t){.stall_us = 1000, .max_threads = 1};
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), -EINVAL);
    ck_assert_int_eq(sp_scheduler_set_dispatch(s, (sp_dispatch_t)7), -EINVAL);
    ck_assert_int_eq(sp_schedule(s, filler, NULL, SP_ANY_WORKER), 0);
    o = (sp_monitor_opts_t){.stall_us = 1000, .max_threads = 4};
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), -EBUSY); /* queued */
    o.max_threads = 0;
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), 0);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), -EBUSY);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);

    /* An IOManager grows too; its extra slots are freed unused. */
    sp_iomanager_t *io = sp_iomanager_create("cfg-io", 1, false);
    o = (sp_monitor_opts_t){.stall_us = 1000, .max_threads = 3};
    ck_assert_int_eq(sp_scheduler_set_monitor(sp_iomanager_scheduler(io), &o), 0);
    sp_iomanager_destroy(io);

    /* Growth set up before anything is queued reallocates the slots. */
    s = sp_scheduler_create("cfg2", 1, true);
    o = (sp_monitor_opts_t){.stall_us = 1000, .max_threads = 3};
    ck_assert_int_eq(sp_scheduler_set_monitor(s, &o), 0);
    ck_assert_int_eq(sp_schedule(s, filler, NULL, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("monitor");
    TCase *tc = tcase_create("monitor");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stuck_worker_queue_taken_by_busy_worker);
    tcase_add_test(tc, migrate_stuck_moves_started_fibers);
    tcase_add_test(tc, cpu_bound_fiber_reported);
    tcase_add_test(tc, grows_while_stuck_and_shrinks_back);
    tcase_add_test(tc, iomanager_grows_while_stuck_and_shrinks_back);
    tcase_add_loop_test(tc, dispatch_placement, 0,
                        (int)(sizeof placements / sizeof placements[0]));
    tcase_add_test(tc, bad_configuration);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
