/* How an idle worker's poll ends at its earliest timer: deadlines nearer
 * than the loop's millisecond (a timerfd), farther ones (libev's timeout
 * aimed early, then the timerfd), a nearer deadline arriving while a later
 * one is armed, a near timer cancelled after it was armed, timers added
 * from another thread. Every sleep, wait and timer must end (the test's
 * time bound catches one that never does) and none before its deadline;
 * how close to it they end is measured by `spindle-bench lateness`. */
#include <check.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/timer.h>

#include "testutil.h"

/* Sleep and wait lengths on both sides of the loop's millisecond and of
 * the near/far boundary (2 ms). */
static const uint64_t lengths_us[] = {1,    50,   100,  999,  1000, 1001,
                                      1500, 1999, 2000, 2001, 2500, 5000};
enum { NLEN = sizeof lengths_us / sizeof lengths_us[0] };

/* Run fn(arg) as a fiber on a one-worker IOManager (so the worker is idle
 * whenever the fiber waits); return once everything it started ended. */
static void run1(sp_fiber_fn fn, void *arg)
{
    sp_iomanager_t *io = sp_iomanager_create("wake", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), fn, arg, 0), 0);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

static void sleep_not_early(uint64_t us)
{
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(sp_sleep_us(us), 0);
    ck_assert_uint_ge(sp_now_ns() - t0, us * 1000);
}

static void sleep_each_length(void *arg)
{
    (void)arg;
    for (int i = 0; i < NLEN; i++)
        sleep_not_early(lengths_us[i]);
}

START_TEST(sleeps_near_and_far)
{
    run1(sleep_each_length, NULL);
}
END_TEST

/* ---- a nearer deadline while a later one is armed ----------------------- */

static int order[2], norder;

static void short_sleeper(void *arg)
{
    (void)arg;
    sleep_not_early(100);
    order[norder++] = 1;
}

/* The worker arms its wake-up for this fiber's 1.8 ms, then the queued
 * short sleeper adds a deadline before it. */
static void long_sleeper(void *arg)
{
    (void)arg;
    norder = 0;
    ck_assert_int_eq(sp_schedule(sp_scheduler_current(), short_sleeper, NULL, 0), 0);
    sleep_not_early(1800);
    order[norder++] = 2;
}

START_TEST(nearer_deadline_while_armed)
{
    run1(long_sleeper, NULL);
    ck_assert_int_eq(norder, 2);
    ck_assert_int_eq(order[0], 1);
    ck_assert_int_eq(order[1], 2);
}
END_TEST

/* ---- timed waits; a near timer cancelled after it was armed ------------- */

static int sv[2];

static void write_one(void *arg)
{
    (void)arg;
    ck_assert_int_eq(send(sv[1], "x", 1, MSG_DONTWAIT), 1);
}

static void waits(void *arg)
{
    (void)arg;
    for (int i = 0; i < NLEN; i++) {
        uint64_t t0 = sp_now_ns();
        ck_assert_int_eq(sp_io_wait(sv[0], SP_IO_READ, (int64_t)lengths_us[i]),
                         -ETIMEDOUT);
        ck_assert_uint_ge(sp_now_ns() - t0, lengths_us[i] * 1000);
    }
    /* Ends ready: the worker blocked with this wait's 1.5 ms timeout armed
     * (the writer runs first, then the poll finds the byte); the sleep
     * after it must outlast that stale arming. */
    ck_assert_int_eq(sp_schedule(sp_scheduler_current(), write_one, NULL, 0), 0);
    ck_assert_int_eq(sp_io_wait(sv[0], SP_IO_READ, 1500), 0);
    sleep_not_early(5000);
    char c;
    ck_assert_int_eq(recv(sv[0], &c, 1, MSG_DONTWAIT), 1);
}

START_TEST(timed_waits_and_cancelled_timer)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    run1(waits, NULL);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- timers added from another thread ----------------------------------- */

static uint64_t due[NLEN], fired[NLEN];

static void record(void *arg)
{
    fired[(uint64_t *)arg - due] = sp_now_ns();
}

START_TEST(timers_from_outside)
{
    sp_iomanager_t *io = sp_iomanager_create("wake", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    /* Longest first: each later add is the new earliest and kicks the
     * sleeping worker. */
    for (int i = NLEN - 1; i >= 0; i--) {
        due[i] = sp_now_ns() + lengths_us[i] * 1000;
        ck_assert_int_eq(sp_timer_add(io, lengths_us[i], record, &due[i], 0, NULL, NULL), 0);
    }
    ck_assert_int_eq(sp_iomanager_stop(io), 0); /* once every timer fired */
    sp_iomanager_destroy(io);
    for (int i = 0; i < NLEN; i++)
        ck_assert_uint_ge(fired[i], due[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("timer_wake");
    SP_TEST_CASE(s, "wake", 60, NULL, NULL, sleeps_near_and_far,
                 nearer_deadline_while_armed, timed_waits_and_cancelled_timer,
                 timers_from_outside);
    return sp_test_run(s);
}
