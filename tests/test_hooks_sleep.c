/* Hooks: clock_nanosleep (relative and TIMER_ABSTIME, on CLOCK_MONOTONIC
 * and CLOCK_REALTIME) and C11 thrd_sleep park a fiber on ONE worker while
 * another fiber runs; their results are POSIX's and C11's. On a plain
 * thread they are libc's, EINTR and the remaining time included. Built
 * twice, like test_hooks: hooks linked in, and LD_PRELOAD. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <threads.h>
#include <time.h>

#include <spindle/iomanager.h>
#include <spindle/timer.h>

#include "testutil.h"

static uint64_t ns_of(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static struct timespec ts_of(uint64_t ns)
{
    return (struct timespec){(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
}

/* ---- in a fiber: parks, never early, another fiber runs meanwhile ------- */

static bool marked;

static void mark(void *arg)
{
    (void)arg;
    marked = true;
}

/* One sleep of each kind; before each, a marker fiber is queued behind
 * the sleeper on its only worker: it can have run by the time the sleep
 * returns only if the sleep parked instead of blocking the thread. */
typedef int (*sleep_fn)(uint64_t ns);

static void sleeps_and_marker_runs(sleep_fn fn, uint64_t ns)
{
    marked = false;
    ck_assert_int_eq(sp_schedule(sp_scheduler_current(), mark, NULL, 0), 0);
    ck_assert_int_eq(fn(ns), 0);
    ck_assert(marked);
}

static int rel_monotonic(uint64_t ns)
{
    struct timespec req = ts_of(ns), rem = {7, 7};
    uint64_t t0 = ns_of(CLOCK_MONOTONIC);
    int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem);
    ck_assert_uint_ge(ns_of(CLOCK_MONOTONIC) - t0, ns);
    ck_assert(rem.tv_sec == 7 && rem.tv_nsec == 7); /* only for EINTR */
    return rc;
}

static int rel_realtime(uint64_t ns)
{
    struct timespec req = ts_of(ns);
    uint64_t t0 = ns_of(CLOCK_MONOTONIC);
    int rc = clock_nanosleep(CLOCK_REALTIME, 0, &req, NULL);
    ck_assert_uint_ge(ns_of(CLOCK_MONOTONIC) - t0, ns);
    return rc;
}

static int abs_on(clockid_t clock, uint64_t ns)
{
    uint64_t end = ns_of(clock) + ns;
    struct timespec at = ts_of(end);
    int rc = clock_nanosleep(clock, TIMER_ABSTIME, &at, NULL);
    ck_assert_uint_ge(ns_of(clock), end);
    return rc;
}

static int abs_monotonic(uint64_t ns)
{
    return abs_on(CLOCK_MONOTONIC, ns);
}

static int abs_realtime(uint64_t ns)
{
    return abs_on(CLOCK_REALTIME, ns);
}

static int c11(uint64_t ns)
{
    struct timespec req = ts_of(ns), rem = {7, 7};
    uint64_t t0 = ns_of(CLOCK_MONOTONIC);
    int rc = thrd_sleep(&req, &rem);
    ck_assert_uint_ge(ns_of(CLOCK_MONOTONIC) - t0, ns);
    ck_assert(rem.tv_sec == 7 && rem.tv_nsec == 7);
    return rc;
}

static void every_sleep(void *arg)
{
    (void)arg;
    static const sleep_fn fns[] = {rel_monotonic, rel_realtime, abs_monotonic,
                                   abs_realtime, c11};
    /* Below the loop's millisecond, and across a few of them. */
    static const uint64_t lengths[] = {300000, 2500000};
    for (unsigned i = 0; i < sizeof fns / sizeof fns[0]; i++)
        for (unsigned j = 0; j < sizeof lengths / sizeof lengths[0]; j++)
            sleeps_and_marker_runs(fns[i], lengths[j]);
}

static void run1(sp_fiber_fn fn)
{
    sp_iomanager_t *io = sp_iomanager_create("sleep", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), fn, NULL, 0), 0);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

START_TEST(fiber_sleeps_park)
{
    run1(every_sleep);
}
END_TEST

/* Results as POSIX and C11 give them: the error number itself (errno
 * untouched), thrd_sleep's -2; a deadline already past returns at once. */
static void results(void *arg)
{
    (void)arg;
    struct timespec bad = {0, 1000000000L}, neg = {-1, 0};
    errno = 0;
    ck_assert_int_eq(clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, NULL), EINVAL);
    ck_assert_int_eq(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &bad, NULL), EINVAL);
    ck_assert_int_eq(errno, 0);
    ck_assert_int_eq(thrd_sleep(&neg, NULL), -2);
    ck_assert_int_eq(thrd_sleep(&bad, NULL), -2);
    struct timespec past = ts_of(ns_of(CLOCK_MONOTONIC) - 1000000);
    ck_assert_int_eq(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL), 0);
    /* Not a clock one can sleep on: the kernel's answer. */
    struct timespec ms = {0, 1000000};
    ck_assert_int_eq(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &ms, NULL), EINVAL);
}

START_TEST(fiber_results)
{
    run1(results);
}
END_TEST

/* ---- a plain thread: libc's, interrupted by a signal -------------------- */

static void on_signal(int sig)
{
    (void)sig;
}

typedef struct interrupted {
    int kind; /* 0: relative, 1: absolute, 2: thrd_sleep */
    _Atomic bool done;
    int rc;
    struct timespec rem;
} interrupted_t;

static void *sleep_long(void *arg)
{
    interrupted_t *in = arg;
    struct timespec ten = {10, 0};
    in->rem = (struct timespec){-1, -1}; /* not written: stays so */
    if (in->kind == 0) {
        in->rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ten, &in->rem);
    } else if (in->kind == 1) {
        struct timespec at = ts_of(ns_of(CLOCK_MONOTONIC) + 10000000000u);
        in->rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, &in->rem);
    } else {
        in->rc = thrd_sleep(&ten, &in->rem);
    }
    atomic_store(&in->done, true);
    return NULL;
}

/* Signal the sleeper until its sleep ends (a signal that comes before it
 * sleeps interrupts nothing; the next one does). */
static void interrupt(interrupted_t *in)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, sleep_long, in), 0);
    struct timespec ms = {0, 1000000};
    while (!atomic_load(&in->done)) {
        pthread_kill(t, SIGUSR1);
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ms, NULL);
    }
    pthread_join(t, NULL);
}

START_TEST(thread_eintr_and_remaining)
{
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    interrupted_t rel = {.kind = 0}, abs = {.kind = 1}, c = {.kind = 2};
    interrupt(&rel);
    ck_assert_int_eq(rel.rc, EINTR);
    /* Written; the kernel's count can exceed the request by its timer
     * slack when the signal comes at once. */
    ck_assert(rel.rem.tv_sec >= 0 && rel.rem.tv_sec <= 10);
    interrupt(&abs);
    ck_assert_int_eq(abs.rc, EINTR);
    ck_assert_int_eq(abs.rem.tv_sec, -1); /* absolute: untouched */
    interrupt(&c);
    ck_assert_int_eq(c.rc, -1);
    ck_assert(c.rem.tv_sec >= 0 && c.rem.tv_sec <= 10);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks_sleep");
    SP_TEST_CASE(s, "sleep", 60, NULL, NULL, fiber_sleeps_park, fiber_results,
                 thread_eintr_and_remaining);
    return sp_test_run(s);
}
