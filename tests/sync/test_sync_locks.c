/* Sync primitives, the locks: mutual exclusion, rwlock, condition
 * variable, semaphore and wait group; in fibers on several workers and in
 * plain threads. Every wait is bounded by an event or a timeout; nothing
 * sleeps and hopes. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/sync.h>
#include <spindle/timer.h>


#include "sync_util.h"
#include "testutil.h"

/* ---- mutex: 10,000 fibers on 2 workers ---------------------------------- */

/* TSan makes every switch ~50x dearer: the same 10,000 fibers, fewer
 * rounds each. */
#ifdef SP_TSAN
enum { MX_FIBERS = 10000, MX_ITERS = 4 };
#else
enum { MX_FIBERS = 10000, MX_ITERS = 10 };
#endif

static sp_mutex_t *mx;
static long mx_counter; /* deliberately not atomic: the mutex guards it */
static _Atomic int mx_inside, mx_overlap;

static void mx_fiber(void *arg)
{
    (void)arg;
    for (int i = 0; i < MX_ITERS; i++) {
        ck_assert_int_eq(sp_mutex_lock(mx), 0);
        if (atomic_fetch_add(&mx_inside, 1))
            atomic_fetch_add(&mx_overlap, 1);
        long c = mx_counter;
        if (i % 3 == 0)
            sp_yield(); /* hold it across a switch: others must park */
        mx_counter = c + 1;
        atomic_fetch_sub(&mx_inside, 1);
        ck_assert_int_eq(sp_mutex_unlock(mx), 0);
    }
}

START_TEST(mutex_exclusion_10k_fibers)
{
    mx = sp_mutex_create();
    ck_assert_ptr_nonnull(mx);
    mx_counter = 0;
    sp_scheduler_t *s = sp_scheduler_create("mx", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (int i = 0; i < MX_FIBERS; i++)
        ck_assert_int_eq(sp_schedule(s, mx_fiber, NULL, i % 2), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(mx_counter, (long)MX_FIBERS * MX_ITERS);
    ck_assert_int_eq(atomic_load(&mx_overlap), 0);
    sp_mutex_destroy(mx);
}
END_TEST

/* Fibers and plain threads share one mutex. */
enum { MIX_ITERS = 20000 };

static void *mx_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < MIX_ITERS; i++) {
        ck_assert_int_eq(sp_mutex_lock(mx), 0);
        mx_counter++;
        ck_assert_int_eq(sp_mutex_unlock(mx), 0);
    }
    return NULL;
}

static void mx_mix_fiber(void *arg)
{
    mx_thread(arg);
}

START_TEST(mutex_fibers_and_threads)
{
    mx = sp_mutex_create();
    mx_counter = 0;
    sp_scheduler_t *s = sp_scheduler_create("mix", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, mx_thread, NULL), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(sp_schedule(s, mx_mix_fiber, NULL, i % 2), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(mx_counter, 6L * MIX_ITERS);
    sp_mutex_destroy(mx);
}
END_TEST

static void *lock_from_thread(void *arg)
{
    sp_mutex_t *m = arg;
    return (void *)(long)sp_mutex_trylock(m);
}

START_TEST(mutex_ownership_errors)
{
    sp_mutex_t *m = sp_mutex_create();
    ck_assert_int_eq(sp_mutex_unlock(m), -EPERM);
    ck_assert_int_eq(sp_mutex_lock(m), 0);
    ck_assert_int_eq(sp_mutex_lock(m), -EDEADLK);
    ck_assert_int_eq(sp_mutex_trylock(m), -EBUSY);
    pthread_t t;
    void *r;
    ck_assert_int_eq(pthread_create(&t, NULL, lock_from_thread, m), 0);
    pthread_join(t, &r);
    ck_assert_int_eq((long)r, -EBUSY);
    ck_assert_int_eq(sp_mutex_unlock(m), 0);
    ck_assert_int_eq(sp_mutex_unlock(m), -EPERM);
    ck_assert_int_eq(sp_mutex_trylock(m), 0);
    ck_assert_int_eq(sp_mutex_unlock(m), 0);
    sp_mutex_destroy(m);
    sp_mutex_destroy(NULL);
}
END_TEST

/* Timed lock: never early, fiber (IOManager) and thread alike; -ENOTSUP
 * in a plain scheduler's fiber; a holder's unlock ends the wait early. */
static sp_mutex_t *tm;
static sp_sem_t *tm_held, *tm_release, *tm_done;
static _Atomic int tm_rc;
static _Atomic uint64_t tm_elapsed;

static void tm_holder(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_mutex_lock(tm), 0);
    ck_assert_int_eq(sp_sem_post(tm_held), 0);
    ck_assert_int_eq(sp_sem_wait(tm_release, SP_FOREVER), 0);
    ck_assert_int_eq(sp_mutex_unlock(tm), 0);
}

static void tm_waiter(void *arg)
{
    int64_t timeout = (int64_t)(long)arg;
    uint64_t t0 = now_us();
    atomic_store(&tm_rc, sp_mutex_timedlock(tm, timeout));
    atomic_store(&tm_elapsed, now_us() - t0);
    if (atomic_load(&tm_rc) == 0)
        sp_mutex_unlock(tm);
    sp_sem_post(tm_done);
}

START_TEST(mutex_timedlock)
{
    tm = sp_mutex_create();
    tm_held = sp_sem_create(0);
    tm_release = sp_sem_create(0);
    tm_done = sp_sem_create(0);
    sp_iomanager_t *io = io_new(2);
    go(io, tm_holder, NULL, 0);
    ck_assert_int_eq(sp_sem_wait(tm_held, SP_FOREVER), 0);
    /* In a fiber on either worker. */
    for (int w = 0; w < 2; w++) {
        go(io, tm_waiter, (void *)20000L, w);
        ck_assert_int_eq(sp_sem_wait(tm_done, SP_FOREVER), 0);
        ck_assert_int_eq(atomic_load(&tm_rc), -ETIMEDOUT);
        ck_assert_uint_ge(atomic_load(&tm_elapsed), 20000);
    }
    /* In this plain thread. */
    uint64_t t0 = now_us();
    ck_assert_int_eq(sp_mutex_timedlock(tm, 15000), -ETIMEDOUT);
    ck_assert_uint_ge(now_us() - t0, 15000);
    ck_assert_int_eq(sp_mutex_timedlock(tm, 0), -ETIMEDOUT);
    /* A long timeout ended by the unlock. */
    go(io, tm_waiter, (void *)60000000L, 1);
    ck_assert_int_eq(sp_sem_post(tm_release), 0);
    io_end(io);
    ck_assert_int_eq(atomic_load(&tm_rc), 0);
    ck_assert_uint_lt(atomic_load(&tm_elapsed), 60000000);
    sp_mutex_destroy(tm);
    sp_sem_destroy(tm_held);
    sp_sem_destroy(tm_release);
    sp_sem_destroy(tm_done);
}
END_TEST

static void notsup_fiber(void *arg)
{
    (void)arg;
    sp_mutex_t *m = sp_mutex_create();
    sp_sem_t *s = sp_sem_create(0);
    ck_assert_int_eq(sp_mutex_lock(m), 0);
    /* Bounded waits need IOManager timers; 0 and forever work. */
    ck_assert_int_eq(sp_sem_wait(s, 1000), -ENOTSUP);
    ck_assert_int_eq(sp_sem_wait(s, 0), -ETIMEDOUT);
    ck_assert_int_eq(sp_sem_post(s), 0);
    ck_assert_int_eq(sp_sem_wait(s, SP_FOREVER), 0);
    ck_assert_int_eq(sp_mutex_unlock(m), 0);
    sp_mutex_destroy(m);
    sp_sem_destroy(s);
}

START_TEST(timed_wait_needs_iomanager)
{
    sp_scheduler_t *s = sp_scheduler_create("plain", 1, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_schedule(s, notsup_fiber, NULL, 0), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
}
END_TEST

/* Barging must not starve: a fiber that relocks in a tight loop on one
 * worker keeps the mutex busy; a waiter on the other still gets it (the
 * starvation guard hands it over), which ends the loop. */
static _Atomic int starve_done;
static sp_sem_t *starve_go;

static void starve_looper(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_sem_post(starve_go), 0);
    while (!atomic_load(&starve_done)) {
        sp_mutex_lock(mx);
        sp_mutex_unlock(mx);
    }
}

static void starve_waiter(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_sem_wait(starve_go, SP_FOREVER), 0);
    for (int i = 0; i < 50; i++) {
        ck_assert_int_eq(sp_mutex_lock(mx), 0);
        ck_assert_int_eq(sp_mutex_unlock(mx), 0);
    }
    atomic_store(&starve_done, 1);
}

START_TEST(mutex_no_starvation)
{
    mx = sp_mutex_create();
    starve_go = sp_sem_create(0);
    atomic_store(&starve_done, 0);
    sp_scheduler_t *s = sp_scheduler_create("starve", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_schedule(s, starve_looper, NULL, 0), 0);
    ck_assert_int_eq(sp_schedule(s, starve_waiter, NULL, 1), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    sp_mutex_destroy(mx);
    sp_sem_destroy(starve_go);
}
END_TEST

/* ---- rwlock ------------------------------------------------------------- */

enum { RW_READERS = 8 };
static sp_rwlock_t *rw;
static sp_wg_t *rw_all_in;

/* Each reader holds the lock until every reader is inside: only possible
 * if readers overlap. */
static void rw_overlap_reader(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_rwlock_rdlock(rw, SP_FOREVER), 0);
    ck_assert_int_eq(sp_wg_done(rw_all_in), 0);
    ck_assert_int_eq(sp_wg_wait(rw_all_in, 10000000), 0);
    ck_assert_int_eq(sp_rwlock_unlock(rw), 0);
}

static void *try_read(void *arg)
{
    (void)arg;
    return (void *)(long)sp_rwlock_tryrdlock(rw);
}

START_TEST(rwlock_readers_overlap)
{
    rw = sp_rwlock_create();
    rw_all_in = sp_wg_create();
    ck_assert_int_eq(sp_wg_add(rw_all_in, RW_READERS), 0);
    sp_iomanager_t *io = io_new(2);
    for (int i = 0; i < RW_READERS; i++)
        go(io, rw_overlap_reader, NULL, i % 2);
    io_end(io);
    /* Free again: a writer gets it at once. */
    ck_assert_int_eq(sp_rwlock_trywrlock(rw), 0);
    ck_assert_int_eq(sp_rwlock_tryrdlock(rw), -EDEADLK); /* its writer */
    ck_assert_int_eq(sp_rwlock_wrlock(rw, SP_FOREVER), -EDEADLK);
    pthread_t t;
    void *r;
    ck_assert_int_eq(pthread_create(&t, NULL, try_read, NULL), 0);
    pthread_join(t, &r);
    ck_assert_int_eq((long)r, -EBUSY);
    ck_assert_int_eq(sp_rwlock_unlock(rw), 0);
    ck_assert_int_eq(sp_rwlock_unlock(rw), -EPERM);
    sp_wg_destroy(rw_all_in);
    sp_rwlock_destroy(rw);
}
END_TEST

static _Atomic int rw_readers_in, rw_writers_in, rw_bad;
static long rw_value; /* written by writers only, under the lock */

static void rw_mixed(void *arg)
{
    bool writer = (long)arg % 4 == 0;
    for (int i = 0; i < 200; i++) {
        if (writer) {
            ck_assert_int_eq(sp_rwlock_wrlock(rw, SP_FOREVER), 0);
            if (atomic_fetch_add(&rw_writers_in, 1) ||
                atomic_load(&rw_readers_in))
                atomic_fetch_add(&rw_bad, 1);
            long v = rw_value;
            sp_yield();
            rw_value = v + 1;
            atomic_fetch_sub(&rw_writers_in, 1);
        } else {
            ck_assert_int_eq(sp_rwlock_rdlock(rw, SP_FOREVER), 0);
            atomic_fetch_add(&rw_readers_in, 1);
            if (atomic_load(&rw_writers_in))
                atomic_fetch_add(&rw_bad, 1);
            long v = rw_value;
            sp_yield();
            if (v != rw_value)
                atomic_fetch_add(&rw_bad, 1);
            atomic_fetch_sub(&rw_readers_in, 1);
        }
        ck_assert_int_eq(sp_rwlock_unlock(rw), 0);
    }
}

START_TEST(rwlock_writers_exclusive)
{
    rw = sp_rwlock_create();
    rw_value = 0;
    sp_scheduler_t *s = sp_scheduler_create("rw", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (long i = 0; i < 64; i++)
        ck_assert_int_eq(sp_schedule(s, rw_mixed, (void *)i, (int)(i % 2)), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(atomic_load(&rw_bad), 0);
    ck_assert_int_eq(rw_value, 16 * 200);
    sp_rwlock_destroy(rw);
}
END_TEST

/* A queued writer holds back later readers; when it gives up (timeout),
 * the readers it held back get in. On one worker fibers run in submission
 * order, so a marker fiber scheduled after another runs once that one has
 * parked. */
static sp_sem_t *rw_step;
static _Atomic int rw_w_rc = 1, rw_r2_rc = 1;

static void rw_timed_writer(void *arg)
{
    (void)arg;
    uint64_t t0 = now_us();
    atomic_store(&rw_w_rc, sp_rwlock_wrlock(rw, 100000));
    ck_assert_uint_ge(now_us() - t0, 100000);
}

static void rw_late_reader(void *arg)
{
    (void)arg;
    atomic_store(&rw_r2_rc, sp_rwlock_rdlock(rw, SP_FOREVER));
    sp_rwlock_unlock(rw);
    sp_sem_post(rw_step);
}

START_TEST(rwlock_writer_preference_and_timeout)
{
    rw = sp_rwlock_create();
    rw_step = sp_sem_create(0);
    ck_assert_int_eq(sp_rwlock_rdlock(rw, SP_FOREVER), 0); /* this thread */
    sp_iomanager_t *io = io_new(1);
    go(io, rw_timed_writer, NULL, 0);
    go(io, marker, rw_step, 0);
    ck_assert_int_eq(sp_sem_wait(rw_step, SP_FOREVER), 0);
    ck_assert_int_eq(sp_rwlock_tryrdlock(rw), -EBUSY); /* writer queued */
    go(io, rw_late_reader, NULL, 0); /* queues behind the writer */
    ck_assert_int_eq(sp_sem_wait(rw_step, SP_FOREVER), 0);
    ck_assert_int_eq(atomic_load(&rw_w_rc), -ETIMEDOUT);
    ck_assert_int_eq(atomic_load(&rw_r2_rc), 0); /* while we still read */
    ck_assert_int_eq(sp_rwlock_unlock(rw), 0);
    io_end(io);
    sp_sem_destroy(rw_step);
    sp_rwlock_destroy(rw);
}
END_TEST

/* ---- condition variable ------------------------------------------------- */

enum { CV_ITEMS = 20000, CV_TOTAL = 2 * CV_ITEMS }; /* two producers */
static sp_cond_t *cv;
static int cv_queue[64], cv_len, cv_taken;
static long cv_sum;

static void cv_producer(void *arg)
{
    (void)arg;
    for (int i = 1; i <= CV_ITEMS; i++) {
        sp_mutex_lock(mx);
        while (cv_len == 64)
            ck_assert_int_eq(sp_cond_wait(cv, mx, SP_FOREVER), 0);
        cv_queue[cv_len++] = i;
        sp_cond_broadcast(cv);
        sp_mutex_unlock(mx);
    }
}

static void cv_consumer(void *arg)
{
    (void)arg;
    for (;;) {
        sp_mutex_lock(mx);
        while (cv_len == 0 && cv_taken < CV_TOTAL)
            ck_assert_int_eq(sp_cond_wait(cv, mx, SP_FOREVER), 0);
        if (cv_taken == CV_TOTAL) {
            sp_mutex_unlock(mx);
            return;
        }
        cv_sum += cv_queue[--cv_len];
        if (++cv_taken == CV_TOTAL)
            sp_cond_broadcast(cv); /* the other consumers can leave */
        else
            sp_cond_signal(cv);
        sp_mutex_unlock(mx);
    }
}

START_TEST(cond_producer_consumers)
{
    mx = sp_mutex_create();
    cv = sp_cond_create();
    cv_len = cv_taken = 0;
    cv_sum = 0;
    sp_scheduler_t *s = sp_scheduler_create("cv", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(sp_schedule(s, cv_consumer, NULL, i % 2), 0);
    ck_assert_int_eq(sp_schedule(s, cv_producer, NULL, 0), 0);
    ck_assert_int_eq(sp_schedule(s, cv_producer, NULL, 1), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(cv_taken, CV_TOTAL);
    ck_assert_int_eq(cv_sum, 2L * CV_ITEMS * (CV_ITEMS + 1) / 2);
    sp_cond_destroy(cv);
    sp_mutex_destroy(mx);
}
END_TEST

static _Atomic int cv_rc = 1, cv_woken;
static sp_sem_t *cv_ended;
static _Atomic uint64_t cv_elapsed;
static bool cv_flag;

static void cv_timed(void *arg)
{
    int64_t timeout = (long)arg;
    sp_mutex_lock(mx);
    uint64_t t0 = now_us();
    int rc = 0;
    while (!cv_flag && rc == 0)
        rc = sp_cond_wait(cv, mx, timeout);
    atomic_store(&cv_elapsed, now_us() - t0);
    /* Re-locked whatever the result. */
    ck_assert_int_eq(sp_mutex_unlock(mx), 0);
    atomic_store(&cv_rc, rc);
    atomic_fetch_add(&cv_woken, 1);
    sp_sem_post(cv_ended);
}

START_TEST(cond_timeout_and_signal)
{
    mx = sp_mutex_create();
    cv = sp_cond_create();
    cv_flag = false;
    cv_ended = sp_sem_create(0);
    sp_iomanager_t *io = io_new(2);
    /* Nobody signals: times out, not early. */
    go(io, cv_timed, (void *)25000L, 1);
    ck_assert_int_eq(sp_sem_wait(cv_ended, SP_FOREVER), 0);
    ck_assert_int_eq(atomic_load(&cv_rc), -ETIMEDOUT);
    ck_assert_uint_ge(atomic_load(&cv_elapsed), 25000);
    /* This thread waits too: timeout then signal from a fiber. */
    ck_assert_int_eq(sp_mutex_lock(mx), 0);
    uint64_t t0 = now_us();
    ck_assert_int_eq(sp_cond_wait(cv, mx, 10000), -ETIMEDOUT);
    ck_assert_uint_ge(now_us() - t0, 10000);
    ck_assert_int_eq(sp_cond_wait(cv, mx, 0), -ETIMEDOUT);
    ck_assert_int_eq(sp_mutex_unlock(mx), 0);
    ck_assert_int_eq(sp_cond_wait(cv, mx, 1000), -EPERM);
    /* Four fibers wait (long timeout); broadcast wakes them all. */
    atomic_store(&cv_woken, 0);
    for (int i = 0; i < 4; i++)
        go(io, cv_timed, (void *)60000000L, i % 2);
    sp_mutex_lock(mx);
    cv_flag = true;
    sp_cond_broadcast(cv);
    sp_mutex_unlock(mx);
    io_end(io);
    ck_assert_int_eq(atomic_load(&cv_woken), 4);
    ck_assert_int_eq(atomic_load(&cv_rc), 0);
    sp_sem_destroy(cv_ended);
    sp_cond_destroy(cv);
    sp_mutex_destroy(mx);
}
END_TEST

/* A plain thread waits on the condvar; fibers signal it one at a time. */
static sp_sem_t *cv_ack;

static void *cv_thread(void *arg)
{
    (void)arg;
    sp_mutex_lock(mx);
    for (int i = 0; i < 100; i++) {
        while (cv_len == 0)
            ck_assert_int_eq(sp_cond_wait(cv, mx, SP_FOREVER), 0);
        cv_len--;
        sp_sem_post(cv_ack);
    }
    sp_mutex_unlock(mx);
    return NULL;
}

static void cv_signaller(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++) {
        sp_mutex_lock(mx);
        cv_len++;
        sp_cond_signal(cv);
        sp_mutex_unlock(mx);
        ck_assert_int_eq(sp_sem_wait(cv_ack, SP_FOREVER), 0);
    }
}

START_TEST(cond_thread_waiter)
{
    mx = sp_mutex_create();
    cv = sp_cond_create();
    cv_ack = sp_sem_create(0);
    cv_len = 0;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, cv_thread, NULL), 0);
    sp_scheduler_t *s = sp_scheduler_create("cvt", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_schedule(s, cv_signaller, NULL, 1), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    pthread_join(t, NULL);
    sp_scheduler_destroy(s);
    sp_sem_destroy(cv_ack);
    sp_cond_destroy(cv);
    sp_mutex_destroy(mx);
}
END_TEST

/* ---- semaphore ---------------------------------------------------------- */

static sp_sem_t *sem;
static _Atomic int sem_in, sem_max, sem_runs;

static void sem_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 50; i++) {
        ck_assert_int_eq(sp_sem_wait(sem, SP_FOREVER), 0);
        int in = atomic_fetch_add(&sem_in, 1) + 1;
        int m = atomic_load(&sem_max);
        while (in > m && !atomic_compare_exchange_weak(&sem_max, &m, in))
            ;
        sp_yield();
        atomic_fetch_sub(&sem_in, 1);
        atomic_fetch_add(&sem_runs, 1);
        ck_assert_int_eq(sp_sem_post(sem), 0);
    }
}

START_TEST(semaphore_limits_concurrency)
{
    sem = sp_sem_create(3);
    sp_scheduler_t *s = sp_scheduler_create("sem", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(sp_schedule(s, sem_worker, NULL, i % 2), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(atomic_load(&sem_runs), 40 * 50);
    ck_assert_int_le(atomic_load(&sem_max), 3);
    ck_assert_int_eq(sp_sem_value(sem), 3);
    sp_sem_destroy(sem);
}
END_TEST

static _Atomic int sem_order[8], sem_order_n;

static void sem_fifo_waiter(void *arg)
{
    ck_assert_int_eq(sp_sem_wait(sem, SP_FOREVER), 0);
    sem_order[atomic_fetch_add(&sem_order_n, 1)] = (int)(long)arg;
}

static void sem_fifo_main(void *arg)
{
    (void)arg;
    /* One worker: each waiter runs and parks in submission order. */
    for (long i = 0; i < 8; i++)
        ck_assert_int_eq(sp_schedule(sp_scheduler_current(), sem_fifo_waiter,
                                     (void *)i, 0), 0);
    sp_yield(); /* one worker, FIFO: all eight run and queue first */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(sp_sem_post(sem), 0);
}

START_TEST(semaphore_fifo_and_errors)
{
    sem = sp_sem_create(0);
    ck_assert_int_eq(sp_sem_trywait(sem), -EAGAIN);
    uint64_t t0 = now_us();
    ck_assert_int_eq(sp_sem_wait(sem, 12000), -ETIMEDOUT);
    ck_assert_uint_ge(now_us() - t0, 12000);
    sp_scheduler_t *s = sp_scheduler_create("fifo", 1, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_schedule(s, sem_fifo_main, NULL, 0), 0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(atomic_load(&sem_order_n), 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(sem_order[i], i);
    sp_sem_destroy(sem);
    errno = 0;
    ck_assert_ptr_null(sp_sem_create(SP_SEM_MAX + 1u));
    ck_assert_int_eq(errno, EINVAL);
    sem = sp_sem_create(SP_SEM_MAX);
    ck_assert_int_eq(sp_sem_post(sem), -EOVERFLOW);
    ck_assert_int_eq(sp_sem_trywait(sem), 0);
    ck_assert_int_eq(sp_sem_post(sem), 0);
    sp_sem_destroy(sem);
}
END_TEST

/* ---- wait group --------------------------------------------------------- */

static sp_wg_t *wg;
static _Atomic int wg_ran;

static void wg_job(void *arg)
{
    (void)arg;
    sp_yield();
    atomic_fetch_add(&wg_ran, 1);
    ck_assert_int_eq(sp_wg_done(wg), 0);
}

static _Atomic int wg_fiber_rc = 1;

static void wg_fiber_waiter(void *arg)
{
    (void)arg;
    atomic_store(&wg_fiber_rc, sp_wg_wait(wg, SP_FOREVER));
    ck_assert_int_eq(atomic_load(&wg_ran), 100);
}

START_TEST(wait_group)
{
    wg = sp_wg_create();
    ck_assert_int_eq(sp_wg_wait(wg, 0), 0); /* zero: at once */
    ck_assert_int_eq(sp_wg_done(wg), -EINVAL);
    ck_assert_int_eq(sp_wg_add(wg, 100), 0);
    uint64_t t0 = now_us();
    ck_assert_int_eq(sp_wg_wait(wg, 8000), -ETIMEDOUT);
    ck_assert_uint_ge(now_us() - t0, 8000);
    ck_assert_int_eq(sp_wg_count(wg), 100);
    sp_iomanager_t *io = io_new(2);
    go(io, wg_fiber_waiter, NULL, 0);
    for (int i = 0; i < 100; i++)
        go(io, wg_job, NULL, SP_ANY_WORKER);
    ck_assert_int_eq(sp_wg_wait(wg, SP_FOREVER), 0); /* a plain thread */
    ck_assert_int_eq(atomic_load(&wg_ran), 100);
    io_end(io);
    ck_assert_int_eq(atomic_load(&wg_fiber_rc), 0);
    ck_assert_int_eq(sp_wg_count(wg), 0);
    sp_wg_destroy(wg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sync_locks");
    SP_TEST_CASE(s, "sync_locks", 120, NULL, NULL, mutex_exclusion_10k_fibers,
                 mutex_fibers_and_threads, mutex_ownership_errors, mutex_timedlock,
                 timed_wait_needs_iomanager, mutex_no_starvation, rwlock_readers_overlap,
                 rwlock_writers_exclusive, rwlock_writer_preference_and_timeout,
                 cond_producer_consumers, cond_timeout_and_signal, cond_thread_waiter,
                 semaphore_limits_concurrency, semaphore_fifo_and_errors, wait_group);
    return sp_test_run(s);
}
