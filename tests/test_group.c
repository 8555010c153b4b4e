/* Task groups: concurrency limit, cancel on first failure, dependency
 * order, cycle refusal, waits from fibers and threads with timeouts. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/group.h>
#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/sync.h>
#include <spindle/timer.h>

#include "testutil.h"

static sp_scheduler_t *sched_new(int threads)
{
    sp_scheduler_t *s = sp_scheduler_create("group", threads, false);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    return s;
}

static void sched_end(sp_scheduler_t *s)
{
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
}

/* ---- limit -------------------------------------------------------------- */

static _Atomic int in_flight, peak, ran;

static void enter(void)
{
    int n = atomic_fetch_add(&in_flight, 1) + 1;
    int p = atomic_load(&peak);
    while (n > p && !atomic_compare_exchange_weak(&peak, &p, n))
        ;
}

/* The first `limit` jobs meet here: they can only all get past it if the
 * group really runs `limit` jobs at once. */
static sp_wg_t *first_batch;
static _Atomic int arrivals;

static int yielding_job(void *arg)
{
    int limit = (int)(long)arg;
    enter();
    if (atomic_fetch_add(&arrivals, 1) < limit)
        ck_assert_int_eq(sp_wg_done(first_batch), 0);
    ck_assert_int_eq(sp_wg_wait(first_batch, SP_FOREVER), 0);
    for (int i = 0; i < 5; i++)
        sp_yield();
    atomic_fetch_sub(&in_flight, 1);
    atomic_fetch_add(&ran, 1);
    return 0;
}

START_TEST(limit_and_progress)
{
    atomic_store(&peak, 0);
    atomic_store(&ran, 0);
    first_batch = sp_wg_create();
    ck_assert_int_eq(sp_wg_add(first_batch, 4), 0);
    sp_scheduler_t *s = sched_new(2);
    sp_group_t *g = sp_group_create(s, "batch", 4);
    ck_assert_str_eq(sp_group_name(g), "batch");
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(sp_group_add(g, yielding_job, (void *)4L), i);
    sp_group_progress_t p;
    sp_group_progress(g, &p);
    ck_assert_int_eq(p.total, 200);
    ck_assert_int_eq(p.done, 0);
    ck_assert_int_eq(atomic_load(&ran), 0); /* nothing before start */
    sp_group_failure_t f = {-7, -7};
    ck_assert_int_eq(sp_group_wait(g, SP_FOREVER, &f), 0);
    ck_assert_int_eq(f.job, -7); /* untouched on success */
    ck_assert_int_eq(atomic_load(&ran), 200);
    ck_assert_int_eq(atomic_load(&peak), 4); /* the limit, reached */
    sp_group_progress(g, &p);
    ck_assert_int_eq(p.total, 200);
    ck_assert_int_eq(p.done, 200);
    ck_assert_int_eq(p.succeeded, 200);
    ck_assert_int_eq(p.running, 0);
    ck_assert_int_eq(sp_group_start(g), -EALREADY);
    sp_group_destroy(g);
    sched_end(s);
    sp_wg_destroy(first_batch);
}
END_TEST

/* ---- first failure cancels the rest ----------------------------------- */

static _Atomic int ran_mask[64];

static int numbered_job(void *arg)
{
    long id = (long)arg;
    atomic_store(&ran_mask[id], 1);
    return id == 3 ? 42 : 0;
}

START_TEST(failure_cancels_pending)
{
    memset(ran_mask, 0, sizeof ran_mask);
    sp_scheduler_t *s = sched_new(2);
    sp_group_t *g = sp_group_create(s, "fail", 1); /* one at a time */
    for (long i = 0; i < 10; i++)
        ck_assert_int_eq(sp_group_add(g, numbered_job, (void *)i), (int)i);
    sp_group_failure_t f;
    ck_assert_int_eq(sp_group_wait(g, SP_FOREVER, &f), -ECANCELED);
    ck_assert_int_eq(f.job, 3);
    ck_assert_int_eq(f.code, 42);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(atomic_load(&ran_mask[i]), i <= 3);
    sp_group_progress_t p;
    sp_group_progress(g, &p);
    ck_assert_int_eq(p.succeeded, 3);
    ck_assert_int_eq(p.failed, 1);
    ck_assert_int_eq(p.cancelled, 6);
    ck_assert_int_eq(p.done, 10);
    ck_assert(sp_group_cancelled(g));
    ck_assert_int_eq(sp_group_add(g, numbered_job, NULL), -ECANCELED);
    ck_assert_int_eq(sp_group_cancel(g), -EALREADY);
    /* Waiting again gives the same answer at once. */
    ck_assert_int_eq(sp_group_wait(g, 0, &f), -ECANCELED);
    ck_assert_int_eq(f.job, 3);
    sp_group_destroy(g);
    sched_end(s);
}
END_TEST

/* With room for several, the jobs already running finish; the others
 * never start. A running job sees the cancellation. */
static sp_group_t *cg;
static sp_sem_t *gate;
static _Atomic int saw_cancel, started_jobs;

static int gated_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&started_jobs, 1);
    ck_assert_int_eq(sp_sem_wait(gate, SP_FOREVER), 0);
    if (sp_group_cancelled(cg))
        atomic_fetch_add(&saw_cancel, 1);
    return 0;
}

static int failing_job(void *arg)
{
    (void)arg;
    atomic_fetch_add(&started_jobs, 1);
    for (int i = 0; i < 3; i++) /* the gated ones are parked by now */
        ck_assert_int_eq(sp_sem_post(gate), 0);
    return -EIO;
}

START_TEST(failure_lets_running_jobs_finish)
{
    gate = sp_sem_create(0);
    sp_scheduler_t *s = sched_new(1);
    cg = sp_group_create(s, "running", 4);
    for (int i = 0; i < 3; i++)
        ck_assert_int_ge(sp_group_add(cg, gated_job, NULL), 0);
    ck_assert_int_eq(sp_group_add(cg, failing_job, NULL), 3);
    for (int i = 0; i < 20; i++)
        ck_assert_int_ge(sp_group_add(cg, gated_job, NULL), 0);
    sp_group_failure_t f;
    ck_assert_int_eq(sp_group_wait(cg, SP_FOREVER, &f), -ECANCELED);
    ck_assert_int_eq(f.job, 3);
    ck_assert_int_eq(f.code, -EIO);
    ck_assert_int_eq(atomic_load(&started_jobs), 4);
    ck_assert_int_eq(atomic_load(&saw_cancel), 3);
    sp_group_progress_t p;
    sp_group_progress(cg, &p);
    ck_assert_int_eq(p.succeeded, 3);
    ck_assert_int_eq(p.cancelled, 20);
    sp_group_destroy(cg);
    sched_end(s);
    sp_sem_destroy(gate);
}
END_TEST

/* ---- dependencies --------------------------------------------------------- */

enum { DAG_N = 12 };
static _Atomic int clock_, started_at[DAG_N], ended_at[DAG_N];

static int dag_job(void *arg)
{
    long id = (long)arg;
    atomic_store(&started_at[id], atomic_fetch_add(&clock_, 1));
    enter();
    sp_yield();
    sp_yield();
    atomic_fetch_sub(&in_flight, 1);
    atomic_store(&ended_at[id], atomic_fetch_add(&clock_, 1));
    return 0;
}

START_TEST(dependency_order)
{
    /* Edges (job <- deps): a diamond, a chain, and loose jobs. */
    static const int edges[][2] = {
        {1, 0}, {2, 0}, {3, 1}, {3, 2}, /* diamond 0 -> {1,2} -> 3 */
        {5, 4}, {6, 5}, {7, 6},         /* chain 4 -> 5 -> 6 -> 7 */
        {11, 3}, {11, 7},               /* join */
    };
    enum { NEDGES = sizeof edges / sizeof edges[0] };
    atomic_store(&peak, 0);
    sp_scheduler_t *s = sched_new(2);
    sp_group_t *g = sp_group_create(s, "dag", 3);
    /* Jobs first, edges after: a graph is built before it runs. */
    int ids[DAG_N];
    for (long i = 0; i < DAG_N; i++)
        ids[i] = sp_group_add(g, dag_job, (void *)i);
    for (int e = 0; e < NEDGES; e++)
        ck_assert_int_eq(sp_group_depend(g, ids[edges[e][0]], ids[edges[e][1]]), 0);
    ck_assert_int_eq(sp_group_wait(g, SP_FOREVER, NULL), 0);
    for (int e = 0; e < NEDGES; e++)
        ck_assert_int_lt(atomic_load(&ended_at[edges[e][1]]),
                         atomic_load(&started_at[edges[e][0]]));
    ck_assert_int_le(atomic_load(&peak), 3);
    sp_group_destroy(g);

    /* add_after, and jobs added to a running group. */
    g = sp_group_create(s, "after", SP_GROUP_UNLIMITED);
    atomic_store(&clock_, 0);
    int a = sp_group_add(g, dag_job, (void *)0L);
    ck_assert_int_eq(sp_group_start(g), 0);
    int deps[] = {a};
    int b = sp_group_add_after(g, dag_job, (void *)1L, deps, 1);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(sp_group_add_after(g, dag_job, NULL, (int[]){5}, 1),
                     -EINVAL);
    ck_assert_int_eq(sp_group_wait(g, SP_FOREVER, NULL), 0);
    ck_assert_int_lt(atomic_load(&ended_at[0]), atomic_load(&started_at[1]));
    sp_group_destroy(g);
    sched_end(s);
}
END_TEST

static int noop(void *arg)
{
    (void)arg;
    return 0;
}

START_TEST(cycles_refused)
{
    sp_scheduler_t *s = sched_new(1);
    sp_group_t *g = sp_group_create(s, "cycle", 2);
    int a = sp_group_add(g, noop, NULL);
    int b = sp_group_add(g, noop, NULL);
    int c = sp_group_add(g, noop, NULL);
    ck_assert_int_eq(sp_group_depend(g, b, a), 0);  /* b after a */
    ck_assert_int_eq(sp_group_depend(g, c, b), 0);  /* c after b */
    ck_assert_int_eq(sp_group_depend(g, a, c), -EDEADLK);
    ck_assert_int_eq(sp_group_depend(g, a, b), -EDEADLK);
    ck_assert_int_eq(sp_group_depend(g, a, a), -EDEADLK);
    ck_assert_int_eq(sp_group_depend(g, c, a), 0); /* redundant, no cycle */
    ck_assert_int_eq(sp_group_depend(g, a, 99), -EINVAL);
    ck_assert_int_eq(sp_group_depend(g, -1, a), -EINVAL);
    ck_assert_int_eq(sp_group_wait(g, SP_FOREVER, NULL), 0);
    ck_assert_int_eq(sp_group_depend(g, c, a), -EBUSY); /* already ran */
    sp_group_destroy(g);
    errno = 0;
    ck_assert_ptr_null(sp_group_create(s, "bad", -1));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(sp_group_create(NULL, "bad", 1));
    sched_end(s);
}
END_TEST

/* ---- waiting ------------------------------------------------------------- */

static sp_group_t *wg_group;
static _Atomic int fiber_wait_rc = 1, fiber_timeout_rc = 1;
static sp_sem_t *release, *started;
static atomic_bool blocked_over; /* blocked_job is past its wait */

/* Interrupts a cancel sent to blocked_job (which waits on regardless). */
static _Atomic int job_interrupts;
static sp_sem_t *interrupted;

static int blocked_job(void *arg)
{
    (void)arg;
    if (started) /* the test waits for this before it cancels */
        ck_assert_int_eq(sp_sem_post(started), 0);
    int rc;
    while ((rc = sp_sem_wait(release, SP_FOREVER)) == -ECANCELED) {
        atomic_fetch_add(&job_interrupts, 1);
        if (interrupted) /* the test waits for this: the cancel reached us */
            ck_assert_int_eq(sp_sem_post(interrupted), 0);
    }
    atomic_store(&blocked_over, true);
    return rc;
}

static void waiting_fiber(void *arg)
{
    (void)arg;
    atomic_store(&fiber_timeout_rc, sp_group_wait(wg_group, 10000, NULL));
    ck_assert_int_eq(sp_sem_post(release), 0);
    atomic_store(&fiber_wait_rc, sp_group_wait(wg_group, SP_FOREVER, NULL));
}

START_TEST(wait_from_fiber_with_timeout)
{
    release = sp_sem_create(0);
    sp_iomanager_t *io = sp_iomanager_create("gw", 2, false);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    wg_group = sp_group_create(s, "waited", 2);
    ck_assert_int_eq(sp_group_add(wg_group, blocked_job, NULL), 0);
    ck_assert_int_eq(sp_schedule(s, waiting_fiber, NULL, 1), 0);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    ck_assert_int_eq(atomic_load(&fiber_timeout_rc), -ETIMEDOUT);
    ck_assert_int_eq(atomic_load(&fiber_wait_rc), 0);
    sp_group_destroy(wg_group);
    sp_iomanager_destroy(io);
    sp_sem_destroy(release);
}
END_TEST

/* A started group of one slot: blocked_job (holding the slot until
 * `release` is posted; it posts `started` when it runs), then n noops. */
static sp_group_t *start_blocked(sp_scheduler_t *s, const char *name, int n)
{
    release = sp_sem_create(0);
    started = sp_sem_create(0);
    sp_group_t *g = sp_group_create(s, name, 1);
    ck_assert_int_eq(sp_group_add(g, blocked_job, NULL), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_ge(sp_group_add(g, noop, NULL), 0);
    ck_assert_int_eq(sp_group_start(g), 0);
    return g;
}

START_TEST(cancel_from_outside)
{
    sp_scheduler_t *s = sched_new(2);
    sp_group_t *g = start_blocked(s, "cancel", 5);
    /* The first job holds the only slot until released; once it runs, a
     * cancel stops only the jobs that have not started (one cancelled
     * before it began would never run at all). */
    ck_assert_int_eq(sp_sem_wait(started, SP_FOREVER), 0);
    ck_assert_int_eq(sp_group_wait(g, 5000, NULL), -ETIMEDOUT);
    atomic_store(&job_interrupts, 0);
    ck_assert_int_eq(sp_group_cancel(g), 0);
    /* The running job was interrupted, waits on (it ignores that) */
    ck_assert_int_eq(sp_group_wait(g, 5000, NULL), -ETIMEDOUT); /* runs */
    ck_assert_int_eq(sp_sem_post(release), 0);
    sp_group_failure_t f;
    ck_assert_int_eq(sp_group_wait(g, SP_FOREVER, &f), -ECANCELED);
    ck_assert_int_eq(f.job, -1);
    ck_assert_int_eq(f.code, 0);
    ck_assert_int_eq(atomic_load(&job_interrupts), 1);
    sp_group_progress_t p;
    sp_group_progress(g, &p);
    ck_assert_int_eq(p.succeeded, 1);
    ck_assert_int_eq(p.cancelled, 5);
    sp_group_destroy(g);
    /* An empty group is complete at once. */
    g = sp_group_create(s, NULL, 0);
    ck_assert_str_eq(sp_group_name(g), "group");
    ck_assert_int_eq(sp_group_wait(g, 0, NULL), 0);
    sp_group_destroy(g);
    sched_end(s);
    sp_sem_destroy(release);
    sp_sem_destroy(started);
    started = NULL;
}
END_TEST

/* A job that adds more jobs to its own (running) group. */
static sp_group_t *grow_group;
static _Atomic int grown;

static int leaf(void *arg)
{
    (void)arg;
    atomic_fetch_add(&grown, 1);
    return 0;
}

static int spawner(void *arg)
{
    long depth = (long)arg;
    if (depth < 3)
        for (int i = 0; i < 3; i++)
            ck_assert_int_ge(sp_group_add(grow_group, spawner,
                                          (void *)(depth + 1)), 0);
    return leaf(NULL);
}

static void *destroy_thread(void *g)
{
    sp_group_destroy(g);
    return (void *)atomic_load(&blocked_over); /* the job ended first */
}

/* Destroying a group with a job running cancels the jobs not started and
 * returns only once the running one has finished. */
START_TEST(destroy_cancels_and_waits_for_running_jobs)
{
    sp_scheduler_t *s = sched_new(2);
    sp_group_t *g = start_blocked(s, "destroyed", 3);
    ck_assert_int_eq(sp_sem_wait(started, SP_FOREVER), 0);
    interrupted = sp_sem_create(0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, destroy_thread, g), 0);
    /* The destroy's cancel interrupts the running job, which waits on: the
     * group lives until it ends, which waits for us. */
    ck_assert_int_eq(sp_sem_wait(interrupted, 5000000), 0);
    ck_assert(sp_group_cancelled(g));
    ck_assert_int_eq(pthread_tryjoin_np(t, NULL), EBUSY); /* still waiting */
    ck_assert_int_eq(sp_sem_post(release), 0);
    void *waited;
    ck_assert_int_eq(pthread_join(t, &waited), 0);
    ck_assert(waited);
    sched_end(s);
    sp_sem_destroy(started);
    started = NULL;
    sp_sem_destroy(release);
    sp_sem_destroy(interrupted);
    interrupted = NULL;
}
END_TEST

START_TEST(jobs_add_jobs)
{
    sp_scheduler_t *s = sched_new(2);
    grow_group = sp_group_create(s, "tree", 5);
    ck_assert_int_eq(sp_group_add(grow_group, spawner, (void *)0L), 0);
    ck_assert_int_eq(sp_group_wait(grow_group, SP_FOREVER, NULL), 0);
    ck_assert_int_eq(atomic_load(&grown), 1 + 3 + 9 + 27);
    sp_group_destroy(grow_group);
    sched_end(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("group");
    TCase *tc = tcase_create("group");
    tcase_add_test(tc, limit_and_progress);
    tcase_add_test(tc, failure_cancels_pending);
    tcase_add_test(tc, failure_lets_running_jobs_finish);
    tcase_add_test(tc, dependency_order);
    tcase_add_test(tc, cycles_refused);
    tcase_add_test(tc, wait_from_fiber_with_timeout);
    tcase_add_test(tc, cancel_from_outside);
    tcase_add_test(tc, destroy_cancels_and_waits_for_running_jobs);
    tcase_add_test(tc, jobs_add_jobs);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
