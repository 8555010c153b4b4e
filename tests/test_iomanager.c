/* IOManager: fd waits, cancel/delete, callback events, close, stop. The
 * white-box cases (closes handed to a busy worker's inbox) are in
 * internal/test_iomanager_internal.c. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/timer.h>

#include "testutil.h"

static sp_iomanager_t *io;

static void setup(void)
{
    io = sp_iomanager_create("test", 2, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
}

static void teardown(void)
{
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

static void spawn(sp_fiber_fn fn, void *arg)
{
    ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), fn, arg,
                                 SP_ANY_WORKER), 0);
}

/* ---- readiness in both directions --------------------------------------- */

static int sp_pair[2];
static _Atomic int echo_ok;

static void reader(void *arg)
{
    (void)arg;
    char c;
    ck_assert_int_eq(sp_io_wait(sp_pair[0], SP_IO_READ, -1), 0);
    ck_assert_int_eq(read(sp_pair[0], &c, 1), 1);
    ck_assert_int_eq(c, 'x');
    atomic_fetch_add(&echo_ok, 1);
}

static void writer(void *arg)
{
    (void)arg;
    /* Fill the socket buffer, then wait until the peer drains some. */
    char buf[4096] = {0};
    while (write(sp_pair[1], buf, sizeof buf) > 0)
        ;
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(sp_io_wait(sp_pair[1], SP_IO_WRITE, -1), 0);
    ck_assert_int_gt(write(sp_pair[1], buf, 1), 0);
    atomic_fetch_add(&echo_ok, 1);
}

static void drainer(void *arg)
{
    (void)arg;
    char buf[65536];
    sp_sleep_us(20000); /* the writer is blocked by now, or soon will be */
    while (read(sp_pair[0], buf, sizeof buf) > 0)
        ;
    atomic_fetch_add(&echo_ok, 1);
}

START_TEST(read_and_write_readiness)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp_pair), 0);
    atomic_store(&echo_ok, 0);
    spawn(reader, NULL);
    char c = 'x';
    ck_assert_int_eq(write(sp_pair[1], &c, 1), 1);
    teardown();
    ck_assert_int_eq(atomic_load(&echo_ok), 1);
    setup();
    spawn(writer, NULL);
    spawn(drainer, NULL);
    teardown();
    ck_assert_int_eq(atomic_load(&echo_ok), 3);
    close(sp_pair[0]);
    close(sp_pair[1]);
    setup();
}
END_TEST

/* ---- 10,000 fibers on their own socketpairs, woken in random order ------ */

enum { WAITERS = 10000 };
static int pairs[WAITERS][2];
static _Atomic int wakes[WAITERS];
static _Atomic int waiting;
static int nwaiters;

static void pair_waiter(void *arg)
{
    long i = (long)arg;
    atomic_fetch_add(&waiting, 1);
    ck_assert_int_eq(sp_io_wait(pairs[i][0], SP_IO_READ, -1), 0);
    char c;
    ck_assert_int_eq(read(pairs[i][0], &c, 1), 1);
    atomic_fetch_add(&wakes[i], 1);
}

static int fit_pairs(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t want = 2 * WAITERS + 256;
    if (rl.rlim_cur < want) {
        struct rlimit more = {want, rl.rlim_max > want ? rl.rlim_max : want};
        if (setrlimit(RLIMIT_NOFILE, &more) != 0) /* not root: stay in limit */
            return (int)((rl.rlim_max - 256) / 2);
    }
    return WAITERS;
}

START_TEST(ten_thousand_socketpairs_each_woken_once)
{
    nwaiters = fit_pairs();
    ck_assert_int_ge(nwaiters, 1000);
    for (int i = 0; i < nwaiters; i++)
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pairs[i]), 0);
    for (long i = 0; i < nwaiters; i++)
        spawn(pair_waiter, (void *)i);
    int order[WAITERS];
    for (int i = 0; i < nwaiters; i++)
        order[i] = i;
    unsigned seed = 42;
    for (int i = nwaiters - 1; i > 0; i--) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < nwaiters; i++)
        ck_assert_int_eq(write(pairs[order[i]][1], "w", 1), 1);
    teardown();
    for (int i = 0; i < nwaiters; i++) {
        ck_assert_int_eq(atomic_load(&wakes[i]), 1);
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
    setup();
}
END_TEST

/* ---- fibers woken by one poll run in the kernel's order ----------------- */

/* Under load a poll reports many fds at once; serving them in the order
 * the kernel reported them keeps every connection's wait near one batch
 * (libev invokes its callbacks last in, first out). One worker: fibers
 * park on ORDERED socketpairs, a gate task then holds the worker while the
 * test writes to the pairs in order, and the order the fibers ran in must
 * be the writes' order. More fds than one batch of the loop's ready
 * callbacks holds (READY_BATCH, 64), so a batch fills while libev is still
 * calling back, and the order holds across it. */
enum { ORDERED = 160 };
static int opairs[ORDERED][2];
static int ran[ORDERED];
static _Atomic int nran;
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_state; /* 1: the worker is held, 2: let it go */

static void ordered_waiter(void *arg)
{
    long i = (long)arg;
    ck_assert_int_eq(sp_io_wait(opairs[i][0], SP_IO_READ, -1), 0);
    ran[atomic_fetch_add(&nran, 1)] = (int)i;
}

static void gate(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_lock); /* blocks the worker thread itself */
    gate_state = 1;
    pthread_cond_broadcast(&gate_cond);
    while (gate_state != 2)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

START_TEST(woken_fibers_run_in_kernel_order)
{
    sp_iomanager_t *one = sp_iomanager_create("order", 1, false);
    ck_assert_ptr_nonnull(one);
    ck_assert_int_eq(sp_iomanager_start(one), 0);
    sp_scheduler_t *s = sp_iomanager_scheduler(one);
    for (long i = 0; i < ORDERED; i++) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, opairs[i]), 0);
        ck_assert_int_eq(sp_schedule(s, ordered_waiter, (void *)i, SP_ANY_WORKER), 0);
    }
    /* Queued after the waiters: it runs once each of them has parked. */
    ck_assert_int_eq(sp_schedule(s, gate, NULL, SP_ANY_WORKER), 0);
    pthread_mutex_lock(&gate_lock);
    while (gate_state != 1)
        pthread_cond_wait(&gate_cond, &gate_lock);
    for (int i = 0; i < ORDERED; i++)
        ck_assert_int_eq(write(opairs[i][1], "w", 1), 1);
    gate_state = 2;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
    ck_assert_int_eq(sp_iomanager_stop(one), 0);
    sp_iomanager_destroy(one);
    ck_assert_int_eq(atomic_load(&nran), ORDERED);
    for (int i = 0; i < ORDERED; i++) {
        ck_assert_int_eq(ran[i], i);
        close(opairs[i][0]);
        close(opairs[i][1]);
    }
}
END_TEST

/* ---- cancel from another worker, delete versus cancel, close ------------ */

static int cpair[2];
static _Atomic int cancel_result = 1;
static _Atomic int parked_on_fd;

static void wait_and_record(void *arg)
{
    (void)arg;
    atomic_store(&parked_on_fd, 1);
    atomic_store(&cancel_result, sp_io_wait(cpair[0], SP_IO_READ, -1));
}

static void canceller(void *arg)
{
    int *rc = arg;
    while (!atomic_load(&parked_on_fd))
        sp_yield();
    /* The waiter registers right after setting the flag; retry until the
     * event is there to cancel. */
    while ((*rc = sp_io_cancel(cpair[0], SP_IO_READ)) == -ENOENT)
        sp_yield();
}

START_TEST(cancel_from_other_worker)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cpair), 0);
    atomic_store(&parked_on_fd, 0);
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    int rc = 1;
    ck_assert_int_eq(sp_schedule(s, wait_and_record, NULL, 0), 0);
    ck_assert_int_eq(sp_schedule(s, canceller, &rc, 1), 0);
    teardown();
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(atomic_load(&cancel_result), -ECANCELED);
    ck_assert_int_eq(sp_io_cancel(cpair[0], SP_IO_READ), -ENOENT);
    close(cpair[0]);
    close(cpair[1]);
    setup();
}
END_TEST

static _Atomic int cb_calls, cb_last = 1;

static void on_event(void *arg, int result)
{
    (void)arg;
    atomic_store(&cb_last, result);
    atomic_fetch_add(&cb_calls, 1);
}

START_TEST(callback_event_fires_once)
{
    int p[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p), 0);
    atomic_store(&cb_calls, 0);
    ck_assert_int_eq(sp_io_add(io, p[0], SP_IO_READ, on_event, NULL), 0);
    ck_assert_int_eq(sp_io_add(io, p[0], SP_IO_READ, on_event, NULL), -EEXIST);
    ck_assert_int_eq(write(p[1], "a", 1), 1);
    teardown(); /* stop waits for the armed callback event */
    ck_assert_int_eq(atomic_load(&cb_calls), 1);
    ck_assert_int_eq(atomic_load(&cb_last), 0);
    close(p[0]);
    close(p[1]);
    setup();
}
END_TEST

START_TEST(delete_versus_cancel)
{
    int p[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p), 0);
    atomic_store(&cb_calls, 0);
    /* Deleted: never runs, even when the fd becomes ready. */
    ck_assert_int_eq(sp_io_add(io, p[0], SP_IO_READ, on_event, NULL), 0);
    ck_assert_int_eq(sp_io_del(p[0], SP_IO_READ), 0);
    ck_assert_int_eq(sp_io_del(p[0], SP_IO_READ), -ENOENT);
    ck_assert_int_eq(write(p[1], "a", 1), 1);
    /* Cancelled: runs once, told it was cancelled. */
    ck_assert_int_eq(sp_io_add(io, p[1], SP_IO_READ, on_event, NULL), 0);
    ck_assert_int_eq(sp_io_cancel(p[1], SP_IO_READ), 0);
    teardown();
    ck_assert_int_eq(atomic_load(&cb_calls), 1);
    ck_assert_int_eq(atomic_load(&cb_last), -ECANCELED);
    close(p[0]);
    close(p[1]);
    setup();
}
END_TEST

static void wait_then_closed(void *arg)
{
    (void)arg;
    atomic_store(&parked_on_fd, 1);
    atomic_store(&cancel_result, sp_io_wait(cpair[0], SP_IO_READ, -1));
}

static void closer(void *arg)
{
    (void)arg;
    while (!atomic_load(&parked_on_fd))
        sp_yield();
    while (sp_io_close_fd(cpair[0]) == 0)
        sp_yield();
    close(cpair[0]);
}

START_TEST(close_wakes_waiter_with_ebadf)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cpair), 0);
    atomic_store(&parked_on_fd, 0);
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    ck_assert_int_eq(sp_schedule(s, wait_then_closed, NULL, 0), 0);
    ck_assert_int_eq(sp_schedule(s, closer, NULL, 1), 0);
    teardown();
    ck_assert_int_eq(atomic_load(&cancel_result), -EBADF);
    close(cpair[1]);
    setup();
}
END_TEST

static void timed_wait(void *arg)
{
    (void)arg;
    uint64_t t0 = sp_now_ns();
    atomic_store(&cancel_result, sp_io_wait(cpair[0], SP_IO_READ, 30000));
    ck_assert_uint_ge(sp_now_ns() - t0, 30000000u);
}

static void timed_wait_2s(void *arg)
{
    (void)arg;
    atomic_store(&cancel_result, sp_io_wait(cpair[0], SP_IO_READ, 2000000));
}

START_TEST(wait_timeout)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cpair), 0);
    spawn(timed_wait, NULL);
    teardown();
    ck_assert_int_eq(atomic_load(&cancel_result), -ETIMEDOUT);
    close(cpair[0]);
    close(cpair[1]);
    setup();
}
END_TEST

START_TEST(wait_outside_fiber_refused)
{
    ck_assert_int_eq(sp_io_wait(0, SP_IO_READ, -1), -EPERM);
    ck_assert_int_eq(sp_sleep_us(1), -EPERM);
    ck_assert_int_eq(sp_io_add(io, 0, 3, on_event, NULL), -EINVAL);
}
END_TEST

/* ---- an fd wait uses no CPU --------------------------------------------- */

START_TEST(waiting_two_seconds_uses_no_cpu)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cpair), 0);
    double before = sp_test_cpu_seconds();
    spawn(timed_wait_2s, NULL);
    teardown();
    double used = sp_test_cpu_seconds() - before;
    ck_assert_int_eq(atomic_load(&cancel_result), -ETIMEDOUT);
    ck_assert_msg(used < 0.05, "used %.3f s CPU while waiting 2 s", used);
    close(cpair[0]);
    close(cpair[1]);
    setup();
}
END_TEST

/* ---- stats ---------------------------------------------------------------- */

/* Summed over the workers: fd waits and timers now, polls and idle time. */
static sp_io_stats_t io_totals(sp_worker_stats_t *sched)
{
    sp_io_stats_t sum = {0};
    *sched = (sp_worker_stats_t){0};
    for (int w = 0; w < 2; w++) {
        sp_io_stats_t x;
        sp_worker_stats_t y;
        ck_assert_int_eq(sp_iomanager_stats(io, w, &x), 0);
        ck_assert_int_eq(sp_scheduler_stats(sp_iomanager_scheduler(io), w, &y), 0);
        sum.fd_waits += x.fd_waits;
        sum.timers += x.timers;
        sched->polls += y.polls;
        sched->idle_us += y.idle_us;
        sched->fibers += y.fibers;
    }
    return sum;
}

/* Bounded: until the totals show `waits` fd waits, `timers` timers and
 * `fibers` live task fibers. */
static bool await_totals(uint64_t waits, uint64_t timers, uint64_t fibers)
{
    sp_worker_stats_t sched;
    for (int i = 0; i < 10000; i++) {
        sp_io_stats_t t = io_totals(&sched);
        if (t.fd_waits == waits && t.timers == timers && sched.fibers == fibers)
            return true;
        usleep(1000);
    }
    return false;
}

/* A wait with a timeout shows as one fd wait, one timer and one live
 * fiber while it lasts; the workers that idled meanwhile count their polls and time. */
START_TEST(stats_show_waits_and_timers)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cpair), 0);
    atomic_store(&cancel_result, 1);
    spawn(timed_wait_2s, NULL);
    ck_assert(await_totals(1, 1, 1));
    ck_assert_int_eq(write(cpair[1], "x", 1), 1);
    ck_assert(await_totals(0, 0, 0));
    ck_assert_int_eq(atomic_load(&cancel_result), 0);
    sp_worker_stats_t sched;
    io_totals(&sched);
    ck_assert_uint_gt(sched.polls, 0);
    ck_assert_uint_gt(sched.idle_us, 0);
    ck_assert_int_eq(sp_iomanager_stats(io, 2, &(sp_io_stats_t){0}), -EINVAL);
    close(cpair[0]);
    close(cpair[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("iomanager");
    TCase *tc = tcase_create("events");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, read_and_write_readiness);
    tcase_add_test(tc, ten_thousand_socketpairs_each_woken_once);
    tcase_add_test(tc, woken_fibers_run_in_kernel_order);
    tcase_add_test(tc, cancel_from_other_worker);
    tcase_add_test(tc, callback_event_fires_once);
    tcase_add_test(tc, delete_versus_cancel);
    tcase_add_test(tc, close_wakes_waiter_with_ebadf);
    tcase_add_test(tc, wait_timeout);
    tcase_add_test(tc, wait_outside_fiber_refused);
    tcase_add_test(tc, waiting_two_seconds_uses_no_cpu);
    tcase_add_test(tc, stats_show_waits_and_timers);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
