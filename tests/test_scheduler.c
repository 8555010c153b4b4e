/* Scheduler: ordering, binding, stealing, park/wake, stop semantics. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <spindle/scheduler.h>

#include "testutil.h"

/* ---- 1 thread + use_caller: everything inside stop(), in order ---------- */

typedef struct order_log {
    int n;
    int seen[256];
    sp_scheduler_t *s;
} order_log_t;

static order_log_t olog;

static void log_task(void *arg)
{
    olog.seen[olog.n++] = (int)(long)arg;
}

static void spawn_more(void *arg)
{
    int base = (int)(long)arg;
    olog.seen[olog.n++] = base;
    /* Scheduled from inside a task while stop() is running. */
    for (int i = 1; i <= 3; i++)
        ck_assert_int_eq(sp_schedule(olog.s, log_task, (void *)(long)(base + i),
                                     SP_ANY_WORKER), 0);
}

START_TEST(caller_only_runs_in_stop_in_order)
{
    sp_scheduler_t *s = sp_scheduler_create("caller", 1, true);
    ck_assert_ptr_nonnull(s);
    olog.n = 0;
    olog.s = s;
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (long i = 0; i < 100; i++)
        ck_assert_int_eq(sp_schedule(s, log_task, (void *)i, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_schedule(s, spawn_more, (void *)100L, 0), 0);
    ck_assert_int_eq(olog.n, 0); /* nothing runs before stop() */
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    ck_assert_int_eq(olog.n, 104);
    for (int i = 0; i < 104; i++)
        ck_assert_int_eq(olog.seen[i], i);
    ck_assert_int_eq(sp_schedule(s, log_task, NULL, SP_ANY_WORKER), -ESHUTDOWN);
    ck_assert_int_eq(sp_scheduler_stop(s), -EALREADY);
    sp_scheduler_destroy(s);
}
END_TEST

START_TEST(bad_arguments)
{
    errno = 0;
    ck_assert_ptr_null(sp_scheduler_create("x", 0, false));
    ck_assert_int_eq(errno, EINVAL);
    sp_scheduler_t *s = sp_scheduler_create(NULL, 2, false);
    ck_assert_int_eq(sp_schedule(s, log_task, NULL, 2), -EINVAL);
    ck_assert_int_eq(sp_schedule(s, NULL, NULL, 0), -EINVAL);
    ck_assert_int_eq(sp_yield(), -EPERM);
    ck_assert_int_eq(sp_park(), -EPERM);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_scheduler_start(s), -EALREADY);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- bound tasks stay on their worker ----------------------------------- */

static _Atomic int wrong_worker, bound_done;

static void bound_task(void *arg)
{
    int want = (int)(long)arg;
    for (int i = 0; i < 5; i++) {
        if (sp_worker_index() != want)
            atomic_fetch_add(&wrong_worker, 1);
        sp_yield();
    }
    atomic_fetch_add(&bound_done, 1);
}

START_TEST(bound_tasks_run_on_their_worker)
{
    sp_scheduler_t *s = sp_scheduler_create("bound", 3, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (int i = 0; i < 3000; i++)
        ck_assert_int_eq(sp_schedule(s, bound_task, (void *)(long)(i % 3), i % 3), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    ck_assert_int_eq(atomic_load(&bound_done), 3000);
    ck_assert_int_eq(atomic_load(&wrong_worker), 0);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- many short tasks, each exactly once -------------------------------- */

enum { MANY = 100000 };
static _Atomic unsigned char ran[MANY];

static void mark(void *arg)
{
    atomic_fetch_add(&ran[(long)arg], 1);
}

START_TEST(many_tasks_each_once)
{
    sp_scheduler_t *s = sp_scheduler_create("many", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (long i = 0; i < MANY; i++)
        ck_assert_int_eq(sp_schedule(s, mark, (void *)i, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    for (long i = 0; i < MANY; i++)
        ck_assert_int_eq(atomic_load(&ran[i]), 1);
    uint64_t total = 0;
    for (int w = 0; w < 2; w++) {
        sp_worker_stats_t st;
        ck_assert_int_eq(sp_scheduler_stats(s, w, &st), 0);
        total += st.tasks_run;
        ck_assert_uint_ge(st.switches, st.tasks_run);
    }
    ck_assert_uint_eq(total, MANY);
    sp_scheduler_destroy(s);
}
END_TEST

/* One worker fills its own queue and then stays busy until a task ran on
 * the other worker: only stealing can make that happen. */
static sp_scheduler_t *flood_s;
static _Atomic int ran_on_other;

static void mark_where(void *arg)
{
    mark(arg);
    if (sp_worker_index() == 1)
        atomic_store(&ran_on_other, 1);
}

static void flood(void *arg)
{
    (void)arg;
    for (long i = 0; i < 10000; i++)
        sp_schedule(flood_s, mark_where, (void *)i, SP_ANY_WORKER);
    while (!atomic_load(&ran_on_other))
        ; /* keep worker 0 busy without yielding */
}

START_TEST(idle_worker_steals)
{
    for (long i = 0; i < 10000; i++)
        atomic_store(&ran[i], 0);
    flood_s = sp_scheduler_create("steal", 2, false);
    ck_assert_int_eq(sp_scheduler_start(flood_s), 0);
    ck_assert_int_eq(sp_schedule(flood_s, flood, NULL, 0), 0);
    ck_assert_int_eq(sp_scheduler_stop(flood_s), 0);
    sp_worker_stats_t st;
    sp_scheduler_stats(flood_s, 1, &st);
    ck_assert_uint_gt(st.steals, 0);
    for (long i = 0; i < 10000; i++)
        ck_assert_int_eq(atomic_load(&ran[i]), 1);
    sp_scheduler_destroy(flood_s);
}
END_TEST

/* ---- errno survives switches and migration ------------------------------ */

static _Atomic int errno_bad;

static void errno_task(void *arg)
{
    int mine = 1000 + (int)(long)arg;
    for (int i = 0; i < 20; i++) {
        errno = mine;
        sp_yield();
        if (errno != mine)
            atomic_fetch_add(&errno_bad, 1);
    }
}

START_TEST(errno_isolated_across_switches)
{
    sp_scheduler_t *s = sp_scheduler_create("errno", 2, false);
    sp_scheduler_start(s);
    for (long i = 0; i < 200; i++)
        sp_schedule(s, errno_task, (void *)i, SP_ANY_WORKER);
    sp_scheduler_stop(s);
    ck_assert_int_eq(atomic_load(&errno_bad), 0);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- 10,000 fibers parked, woken from a plain thread --------------------- */

enum { PARKED = 10000 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t all_parked;
    int registered;
    sp_fiber_t *fibers[PARKED];
    _Atomic int woke;
} park_ctx = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};

static void park_task(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&park_ctx.lock);
    park_ctx.fibers[park_ctx.registered++] = sp_fiber_current();
    if (park_ctx.registered == PARKED)
        pthread_cond_signal(&park_ctx.all_parked);
    pthread_mutex_unlock(&park_ctx.lock);
    /* The waker may wake us before we park: that wake must not be lost. */
    sp_park();
    atomic_fetch_add(&park_ctx.woke, 1);
}

static void *waker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&park_ctx.lock);
    while (park_ctx.registered < PARKED)
        pthread_cond_wait(&park_ctx.all_parked, &park_ctx.lock);
    pthread_mutex_unlock(&park_ctx.lock);
    /* Wake in a shuffled order. */
    unsigned seed = 12345;
    for (int i = PARKED - 1; i > 0; i--) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1));
        sp_fiber_t *t = park_ctx.fibers[i];
        park_ctx.fibers[i] = park_ctx.fibers[j];
        park_ctx.fibers[j] = t;
    }
    for (int i = 0; i < PARKED; i++)
        ck_assert_int_eq(sp_wake(park_ctx.fibers[i]), 0);
    return NULL;
}

START_TEST(parked_fibers_woken_from_another_thread)
{
    sp_scheduler_t *s = sp_scheduler_create("park", 2, false);
    sp_scheduler_start(s);
    pthread_t th;
    pthread_create(&th, NULL, waker, NULL);
    for (int i = 0; i < PARKED; i++)
        ck_assert_int_eq(sp_schedule(s, park_task, NULL, SP_ANY_WORKER), 0);
    /* stop() also waits for parked fibers: it returns after the wakes. */
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(atomic_load(&park_ctx.woke), PARKED);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- park/wake ping-pong across workers: no lost wake, no double run ---- */

enum { ROUNDS = 20000 };

typedef struct pingpong {
    sp_fiber_t *peer[2];
    _Atomic int turn;
    _Atomic int running[2];
    _Atomic int registered;
    _Atomic int overlap;
} pingpong_t;

static pingpong_t pp;

static void pp_task(void *arg)
{
    int me = (int)(long)arg;
    pp.peer[me] = sp_fiber_current();
    atomic_fetch_add(&pp.registered, 1);
    while (atomic_load(&pp.registered) < 2)
        sp_yield();
    for (int i = 0; i < ROUNDS; i++) {
        while (atomic_load(&pp.turn) != me)
            sp_park();
        if (atomic_fetch_add(&pp.running[me], 1) != 0)
            atomic_fetch_add(&pp.overlap, 1);
        atomic_fetch_sub(&pp.running[me], 1);
        atomic_store(&pp.turn, !me);
        sp_wake(pp.peer[!me]);
    }
}

START_TEST(park_wake_pingpong_across_workers)
{
    sp_scheduler_t *s = sp_scheduler_create("pp", 2, false);
    sp_scheduler_start(s);
    sp_schedule(s, pp_task, (void *)0L, 0);
    sp_schedule(s, pp_task, (void *)1L, 1);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    ck_assert_int_eq(atomic_load(&pp.overlap), 0);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- a user-made fiber handed to the scheduler -------------------------- */

static _Atomic int fiber_task_ran;

static void fiber_body(void *arg)
{
    (void)arg;
    sp_yield();
    atomic_store(&fiber_task_ran, sp_worker_index() == 1 ? 1 : -1);
}

START_TEST(schedule_user_fiber_bound)
{
    sp_scheduler_t *s = sp_scheduler_create("fib", 2, false);
    sp_scheduler_start(s);
    sp_fiber_t *f = sp_fiber_create(fiber_body, NULL, 0, "user");
    ck_assert_int_eq(sp_schedule_fiber(s, f, 1), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    ck_assert_int_eq(atomic_load(&fiber_task_ran), 1);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- stop from a worker is refused -------------------------------------- */

static _Atomic int stop_rc;

static void stop_inside(void *arg)
{
    atomic_store(&stop_rc, sp_scheduler_stop(arg));
}

START_TEST(stop_from_worker_refused)
{
    sp_scheduler_t *s = sp_scheduler_create("self", 1, false);
    sp_scheduler_start(s);
    sp_schedule(s, stop_inside, s, SP_ANY_WORKER);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    ck_assert_int_eq(atomic_load(&stop_rc), -EDEADLK);
    sp_scheduler_destroy(s);
}
END_TEST

/* ---- tasks scheduled from outside while stop() is draining -------------- */

static _Atomic int chain_left;
static sp_scheduler_t *chain_s;

static void chain(void *arg)
{
    (void)arg;
    if (atomic_fetch_sub(&chain_left, 1) > 1)
        ck_assert_int_eq(sp_schedule(chain_s, chain, NULL, SP_ANY_WORKER), 0);
}

START_TEST(tasks_scheduled_during_stop_finish)
{
    chain_s = sp_scheduler_create("chain", 2, true);
    atomic_store(&chain_left, 5000);
    sp_scheduler_start(chain_s);
    sp_schedule(chain_s, chain, NULL, SP_ANY_WORKER);
    ck_assert_int_eq(sp_scheduler_stop(chain_s), 0);
    ck_assert_int_eq(atomic_load(&chain_left), 0);
    sp_scheduler_destroy(chain_s);
}
END_TEST

/* ---- an idle scheduler sleeps ------------------------------------------- */

START_TEST(idle_workers_use_no_cpu)
{
    sp_scheduler_t *s = sp_scheduler_create("idle", 2, false);
    sp_scheduler_start(s);
    double before = sp_test_cpu_seconds();
    struct timespec half = {0, 500 * 1000 * 1000};
    nanosleep(&half, NULL);
    double used = sp_test_cpu_seconds() - before;
    sp_scheduler_stop(s);
    sp_scheduler_destroy(s);
    /* Two spinning workers would burn about a full second here. */
    ck_assert_msg(used < 0.05, "idle scheduler used %.3f s of CPU in 0.5 s", used);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, caller_only_runs_in_stop_in_order);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, bound_tasks_run_on_their_worker);
    tcase_add_test(tc, many_tasks_each_once);
    tcase_add_test(tc, idle_worker_steals);
    tcase_add_test(tc, errno_isolated_across_switches);
    tcase_add_test(tc, parked_fibers_woken_from_another_thread);
    tcase_add_test(tc, park_wake_pingpong_across_workers);
    tcase_add_test(tc, schedule_user_fiber_bound);
    tcase_add_test(tc, stop_from_worker_refused);
    tcase_add_test(tc, tasks_scheduled_during_stop_finish);
    tcase_add_test(tc, idle_workers_use_no_cpu);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
