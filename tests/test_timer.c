/* Timers: ordering and lateness, recurring, cancel, refresh, reset,
 * conditional timers, fiber sleep, stop with live timers. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <spindle/iomanager.h>
#include <spindle/timer.h>

#include "testutil.h"

/* Generous bound for "late": CI runs these under sanitizers and valgrind;
 * bench/ measures real lateness. */
#define LATE_NS (250u * 1000 * 1000)

static sp_iomanager_t *io;

static void setup(void)
{
    io = sp_iomanager_create("timers", 2, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
}

static void stop(void)
{
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
    io = NULL;
}

/* ---- never early, not much late ----------------------------------------- */

enum { SHOTS = 40 };
typedef struct shot {
    uint64_t due, fired;
} shot_t;
static shot_t shots[SHOTS];

static void record(void *arg)
{
    shot_t *s = arg;
    s->fired = sp_now_ns();
}

START_TEST(one_shot_never_early)
{
    setup();
    for (int i = 0; i < SHOTS; i++) {
        uint64_t delay_us = 1000u * (uint64_t)(1 + (i * 7) % 40);
        shots[i].due = sp_now_ns() + delay_us * 1000;
        ck_assert_int_eq(sp_timer_add(io, delay_us, record, &shots[i], 0, NULL, NULL), 0);
    }
    stop(); /* returns once every timer fired */
    for (int i = 0; i < SHOTS; i++) {
        ck_assert_uint_ge(shots[i].fired, shots[i].due);
        ck_assert_msg(shots[i].fired - shots[i].due < LATE_NS, "timer %d late by %llu ns",
                      i, (unsigned long long)(shots[i].fired - shots[i].due));
    }
}
END_TEST

static void sleeper(void *arg)
{
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(sp_sleep_us(500), 0);
    *(uint64_t *)arg = sp_now_ns() - t0;
}

START_TEST(sub_millisecond_sleep)
{
    setup();
    static uint64_t took;
    ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), sleeper, &took, 0), 0);
    stop();
    ck_assert_uint_ge(took, 500000u);
    ck_assert_uint_lt(took, LATE_NS);
}
END_TEST

/* ---- recurring: count, no drift, cancel from its own callback ----------- */

static _Atomic int ticks;
static sp_timer_id_t rec_id;
static uint64_t rec_start, rec_last;

static void on_tick(void *arg)
{
    (void)arg;
    rec_last = sp_now_ns();
    if (atomic_fetch_add(&ticks, 1) + 1 == 10)
        ck_assert_int_eq(sp_timer_cancel(io, rec_id), 0);
}

START_TEST(recurring_counts_and_cancel_from_callback)
{
    setup();
    atomic_store(&ticks, 0);
    rec_start = sp_now_ns();
    ck_assert_int_eq(sp_timer_add(io, 5000, on_tick, NULL, SP_TIMER_RECURRING, NULL, &rec_id), 0);
    stop(); /* only returns because the callback cancelled the timer */
    ck_assert_int_eq(atomic_load(&ticks), 10);
    ck_assert_uint_ge(rec_last - rec_start, 50u * 1000 * 1000);
    ck_assert_int_eq(sp_timer_cancel(NULL, rec_id), -ENOENT);
}
END_TEST

/* ---- a timer's callbacks run on its own worker's thread ------------------ */

/* timer.h: a timer added from a fiber runs on that fiber's worker, and its
 * callback runs there too. A recurring timer's callbacks must not be taken
 * by the other (idle) worker: two periods' callbacks could then run at once
 * on two threads. */
enum { HOME_TICKS = 20 };
static pthread_t home_thread;
static _Atomic int home_ticks, away_ticks;
static sp_timer_id_t home_id;

static void on_home_tick(void *arg)
{
    (void)arg;
    if (!pthread_equal(pthread_self(), home_thread))
        atomic_fetch_add(&away_ticks, 1);
    if (atomic_fetch_add(&home_ticks, 1) + 1 == HOME_TICKS)
        ck_assert_int_eq(sp_timer_cancel(io, home_id), 0);
}

static void add_home_timer(void *arg)
{
    (void)arg;
    home_thread = pthread_self();
    ck_assert_int_eq(sp_timer_add(io, 1000, on_home_tick, NULL, SP_TIMER_RECURRING, NULL,
                                  &home_id), 0);
}

START_TEST(callbacks_run_on_the_timers_worker)
{
    setup();
    atomic_store(&home_ticks, 0);
    atomic_store(&away_ticks, 0);
    ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), add_home_timer, NULL, 1), 0);
    stop(); /* returns once the callback cancelled the timer */
    int ticked = atomic_load(&home_ticks), away = atomic_load(&away_ticks);
    ck_assert_int_eq(ticked, HOME_TICKS);
    ck_assert_int_eq(away, 0);
}
END_TEST

/* ---- cancel while firing, from another thread --------------------------- */

static _Atomic int in_cb, slow_calls;
static _Atomic int release_cb;

static void slow_cb(void *arg)
{
    (void)arg;
    atomic_fetch_add(&slow_calls, 1);
    atomic_store(&in_cb, 1);
    while (!atomic_load(&release_cb))
        sp_yield();
}

START_TEST(cancel_while_firing)
{
    setup();
    atomic_store(&slow_calls, 0);
    atomic_store(&in_cb, 0);
    atomic_store(&release_cb, 0);
    sp_timer_id_t id;
    ck_assert_int_eq(sp_timer_add(io, 2000, slow_cb, NULL, SP_TIMER_RECURRING, NULL, &id), 0);
    while (!atomic_load(&in_cb))
        sched_yield();
    /* The callback is running right now; the cancel must stop the rest. */
    ck_assert_int_eq(sp_timer_cancel(io, id), 0);
    int calls = atomic_load(&slow_calls);
    atomic_store(&release_cb, 1);
    stop();
    /* A firing already handed to a task before the cancel may still run. */
    ck_assert_int_le(atomic_load(&slow_calls), calls + 1);
}
END_TEST

/* ---- refresh and reset -------------------------------------------------- */

typedef struct retimed {
    sp_timer_id_t id;
    uint64_t start, fired;
    int op; /* 0 refresh, 1 reset from start, 2 reset from now */
} retimed_t;

static void retime_fired(void *arg)
{
    ((retimed_t *)arg)->fired = sp_now_ns();
}

static void retimer(void *arg)
{
    retimed_t *r = arg;
    ck_assert_int_eq(sp_sleep_us(40000), 0);
    if (r->op == 0)
        ck_assert_int_eq(sp_timer_refresh(NULL, r->id), 0);
    else
        ck_assert_int_eq(sp_timer_reset(NULL, r->id, 60000, r->op == 2), 0);
}

START_TEST(refresh_and_reset)
{
    setup();
    static retimed_t r[3];
    for (int i = 0; i < 3; i++) {
        r[i].op = i;
        r[i].start = sp_now_ns();
        ck_assert_int_eq(sp_timer_add(io, 300000, retime_fired, &r[i], 0, NULL, &r[i].id), 0);
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), retimer, &r[i], SP_ANY_WORKER), 0);
    }
    stop();
    const uint64_t ms = 1000000;
    /* refresh at ~40 ms of a 300 ms timer: fires >= 340 ms after start */
    ck_assert_uint_ge(r[0].fired - r[0].start, 340 * ms);
    /* reset to 60 ms counted from the original start: ~60 ms, well before
     * the original 300 ms (wide margin for loaded machines) */
    ck_assert_uint_ge(r[1].fired - r[1].start, 60 * ms);
    ck_assert_uint_lt(r[1].fired - r[1].start, 300 * ms);
    /* reset to 60 ms from now (~40 ms): >= 100 ms */
    ck_assert_uint_ge(r[2].fired - r[2].start, 100 * ms);
}
END_TEST

/* ---- conditional timers ------------------------------------------------- */

static _Atomic int cond_fired;

static void on_cond(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cond_fired, 1);
}

START_TEST(conditional_timer_skips_dead_object)
{
    setup();
    atomic_store(&cond_fired, 0);
    sp_token_t *dead = sp_token_create(), *live = sp_token_create();
    ck_assert_int_eq(sp_timer_add(io, 10000, on_cond, NULL, 0, dead, NULL), 0);
    ck_assert_int_eq(sp_timer_add(io, 5000, on_cond, NULL, SP_TIMER_RECURRING, dead, NULL), 0);
    ck_assert_int_eq(sp_timer_add(io, 10000, on_cond, NULL, 0, live, NULL), 0);
    sp_token_kill(dead); /* the object is gone before its timers fire */
    stop(); /* the dead recurring timer retires itself, so stop returns */
    ck_assert_int_eq(atomic_load(&cond_fired), 1);
    sp_token_kill(live);
}
END_TEST

/* ---- many timers, and stop waits for live ones -------------------------- */

static _Atomic int many_fired;

static void count_fire(void *arg)
{
    (void)arg;
    atomic_fetch_add(&many_fired, 1);
}

START_TEST(insert_cancel_many)
{
    setup();
    enum { N = 100000 };
    static sp_timer_id_t ids[N];
    atomic_store(&many_fired, 0);
    for (int i = 0; i < N; i++)
        /* Far off: none may fire while a slow (sanitizer) run adds them. */
        ck_assert_int_eq(sp_timer_add(io, 600000000 + (uint64_t)i, count_fire, NULL, 0, NULL, &ids[i]), 0);
    for (int i = 0; i < N; i += 2)
        ck_assert_int_eq(sp_timer_cancel(io, ids[i]), 0);
    for (int i = 0; i < N; i += 2)
        ck_assert_int_eq(sp_timer_cancel(io, ids[i]), -ENOENT);
    for (int i = 1; i < N; i += 2)
        ck_assert_int_eq(sp_timer_cancel(io, ids[i]), 0);
    stop();
    ck_assert_int_eq(atomic_load(&many_fired), 0);
}
END_TEST

START_TEST(stop_waits_for_live_timer)
{
    setup();
    static shot_t s;
    s.due = sp_now_ns() + 80u * 1000 * 1000;
    ck_assert_int_eq(sp_timer_add(io, 80000, record, &s, 0, NULL, NULL), 0);
    stop();
    ck_assert_uint_ge(s.fired, s.due);
}
END_TEST

START_TEST(bad_timer_arguments)
{
    setup();
    ck_assert_int_eq(sp_timer_add(NULL, 1, count_fire, NULL, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(sp_timer_add(io, 0, count_fire, NULL, SP_TIMER_RECURRING, NULL, NULL), -EINVAL);
    ck_assert_int_eq(sp_timer_add(io, 1, NULL, NULL, 0, NULL, NULL), -EINVAL);
    ck_assert_int_eq(sp_timer_cancel(io, 0), -ENOENT);
    ck_assert_int_eq(sp_timer_cancel(io, 12345678), -ENOENT);
    stop();
    ck_assert_int_eq(sp_timer_add(NULL, 1, count_fire, NULL, 0, NULL, NULL), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("timer");
    TCase *tc = tcase_create("timers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, one_shot_never_early);
    tcase_add_test(tc, sub_millisecond_sleep);
    tcase_add_test(tc, recurring_counts_and_cancel_from_callback);
    tcase_add_test(tc, callbacks_run_on_the_timers_worker);
    tcase_add_test(tc, cancel_while_firing);
    tcase_add_test(tc, refresh_and_reset);
    tcase_add_test(tc, conditional_timer_skips_dead_object);
    tcase_add_test(tc, insert_cancel_many);
    tcase_add_test(tc, stop_waits_for_live_timer);
    tcase_add_test(tc, bad_timer_arguments);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
