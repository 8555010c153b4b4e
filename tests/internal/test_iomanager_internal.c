/* IOManager, white-box (iomanager_internal.h: a worker's inbox): closes
 * handed to a busy worker that owns the watches run the fibers and
 * callbacks they find, and a close arriving while the inbox is taken is
 * not slept on. Split from test_iomanager.c. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/timer.h>

#include "iomanager_internal.h" /* white-box: a worker's inbox */
#include "testutil.h"

static sp_iomanager_t *io;

/* ---- closes handed to a busy worker ------------------------------------- */

/* Closing an fd whose watch another worker owns goes through that worker's
 * inbox. A busy worker takes its inbox on the way to sleep, and each close
 * lets its loop look once more: the first look finds a fiber's fd ready,
 * the second finds nobody waiting and stops the watch, the third has libev
 * take the fd out of epoll. That fiber must run before the worker sleeps:
 * it once stayed until the worker's next event, which hung the
 * shared-client test (three closes are how many it takes to lose it). */
enum { OWNED = 3 };
static int owned[OWNED][2], ready[2];
static sem_t busy_running, busy_release, woken;
static _Atomic int ready_armed;

static void own_watch(void *arg)
{
    int fd = *(int *)arg;
    ck_assert_int_eq(sp_io_wait(fd, SP_IO_READ, -1), 0);
    char c;
    ck_assert_int_eq(read(fd, &c, 1), 1); /* nothing left to report */
    sem_post(&woken);
}

static void wait_ready(void *arg)
{
    (void)arg;
    atomic_store(&ready_armed, 1); /* the wait below arms before it parks */
    ck_assert_int_eq(sp_io_wait(ready[0], SP_IO_READ, -1), 0);
    sem_post(&woken);
}

static void block_worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&ready_armed))
        sp_yield();
    sem_post(&busy_running);
    sem_wait(&busy_release); /* the whole worker thread stops here */
}

static void *close_fd(void *arg)
{
    ck_assert_int_eq(sp_io_close(*(int *)arg), 0);
    return NULL;
}

static void sem_wait_5s(sem_t *s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 5;
    ck_assert_msg(sem_timedwait(s, &t) == 0, "not posted within 5 s");
}

/* Wait (5 s at most) until the inbox of `on`'s worker `worker` holds
 * something other than `head`; returns the new head. */
static void *inbox_moved(sp_iomanager_t *on, int worker, void *head)
{
    for (int i = 0; i < 5000 && atomic_load(&on->w[worker]->inbox) == head; i++)
        usleep(1000);
    void *now = atomic_load(&on->w[worker]->inbox);
    ck_assert_ptr_ne(now, head);
    return now;
}

static void reset_sems(void)
{
    sem_init(&busy_running, 0, 0);
    sem_init(&busy_release, 0, 0);
    sem_init(&woken, 0, 0);
}

/* A socketpair whose first end worker `worker` of s watches; the watch is
 * idle (the byte that woke it was read). */
static void own(sp_scheduler_t *s, int worker, int pair[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
    ck_assert_int_eq(write(pair[1], "o", 1), 1);
    ck_assert_int_eq(sp_schedule(s, own_watch, &pair[0], worker), 0);
    sem_wait_5s(&woken);
}

/* A started IOManager with n workers, and fresh semaphores. */
static sp_iomanager_t *started(const char *name, int n)
{
    sp_iomanager_t *m = sp_iomanager_create(name, n, false);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(sp_iomanager_start(m), 0);
    reset_sems();
    return m;
}

static sp_iomanager_t *one_worker(void)
{
    return started("one", 1);
}

/* The fixture: `io`, two workers (as in test_iomanager.c). */
static void setup(void)
{
    io = started("test", 2);
}

static void teardown(void)
{
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

/* Close the first ends of n pairs, each from a thread of its own, into
 * the inbox of `on`'s worker `worker` (held busy: it owns their watches),
 * each close there before the next starts. */
static void close_into_inbox(sp_iomanager_t *on, int worker, int (*pairs)[2], int n,
                             pthread_t *closers)
{
    void *head = NULL;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(pthread_create(&closers[i], NULL, close_fd, &pairs[i][0]), 0);
        head = inbox_moved(on, worker, head);
    }
}

/* Join n closers and close the other ends of their pairs. */
static void join_closers(pthread_t *closers, int (*pairs)[2], int n)
{
    for (int i = 0; i < n; i++) {
        pthread_join(closers[i], NULL);
        close(pairs[i][1]);
    }
}

START_TEST(closes_on_busy_owner_run_ready_fibers)
{
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    reset_sems();
    atomic_store(&ready_armed, 0);
    for (int i = 0; i < OWNED; i++) /* worker 1 owns a watch on each */
        own(s, 1, owned[i]);
    /* A fiber of worker 1 waits on ready[0]; then the worker is held busy. */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, ready), 0);
    ck_assert_int_eq(sp_schedule(s, wait_ready, NULL, 1), 0);
    ck_assert_int_eq(sp_schedule(s, block_worker, NULL, 1), 0);
    sem_wait_5s(&busy_running);
    ck_assert_int_eq(write(ready[1], "r", 1), 1);
    pthread_t closers[OWNED];
    close_into_inbox(io, 1, owned, OWNED, closers);
    sem_post(&busy_release);
    sem_wait_5s(&woken);
    join_closers(closers, owned, OWNED);
    close(ready[0]);
    close(ready[1]);
}
END_TEST

/* The same look may find a callback event ready: its task is queued on the
 * only worker, which tickles nobody for it (not itself), so that worker
 * must see it before it sleeps. */
static void on_ready_callback(void *arg, int result)
{
    (void)arg;
    ck_assert_int_eq(result, 0);
    sem_post(&woken);
}

static void add_callback_then_block(void *arg)
{
    ck_assert_int_eq(sp_io_add(arg, ready[0], SP_IO_READ, on_ready_callback, NULL), 0);
    atomic_store(&ready_armed, 1);
    block_worker(NULL);
}

START_TEST(close_on_busy_owner_runs_callback_it_finds)
{
    sp_iomanager_t *one = one_worker();
    sp_scheduler_t *s = sp_iomanager_scheduler(one);
    for (int i = 0; i < OWNED; i++)
        own(s, 0, owned[i]);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, ready), 0);
    ck_assert_int_eq(sp_schedule(s, add_callback_then_block, one, 0), 0);
    sem_wait_5s(&busy_running);
    ck_assert_int_eq(write(ready[1], "r", 1), 1);
    pthread_t closers[OWNED];
    close_into_inbox(one, 0, owned, OWNED, closers);
    sem_post(&busy_release);
    sem_wait_5s(&woken);
    join_closers(closers, owned, OWNED);
    ck_assert_int_eq(sp_iomanager_stop(one), 0);
    sp_iomanager_destroy(one);
    close(ready[0]);
    close(ready[1]);
}
END_TEST

/* A close can also reach the inbox while the worker is taking it: its
 * tickle lands in the pipe, and the look of a close taken just before reads
 * it. The worker must not sleep on that close (its closer would wait for
 * good). A thread watches for the worker to take its inbox and closes one
 * more fd right then, while the worker still works through MANY closes. */
enum { MANY = 16 };
static int many[MANY + 1][2];
static sp_iomanager_t *taking;

static void *close_when_taken(void *arg)
{
    uint64_t give_up = sp_now_ns() + 10000000000u;
    while (atomic_load(&taking->w[0]->inbox) && sp_now_ns() < give_up)
        ; /* spin: the window is tens of microseconds */
    ck_assert_int_eq(sp_io_close(*(int *)arg), 0);
    sem_post(&woken);
    return NULL;
}

START_TEST(close_during_inbox_drain_is_not_slept_on)
{
    taking = one_worker();
    sp_scheduler_t *s = sp_iomanager_scheduler(taking);
    for (int i = 0; i <= MANY; i++)
        own(s, 0, many[i]);
    atomic_store(&ready_armed, 1);
    ck_assert_int_eq(sp_schedule(s, block_worker, NULL, 0), 0);
    sem_wait_5s(&busy_running);
    pthread_t closers[MANY + 1];
    close_into_inbox(taking, 0, many, MANY, closers);
    ck_assert_int_eq(pthread_create(&closers[MANY], NULL, close_when_taken, &many[MANY][0]), 0);
    sem_post(&busy_release);
    sem_wait_5s(&woken);
    join_closers(closers, many, MANY + 1);
    ck_assert_int_eq(sp_iomanager_stop(taking), 0);
    sp_iomanager_destroy(taking);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("iomanager_internal");
    SP_TEST_CASE(s, "inbox", 120, setup, teardown, closes_on_busy_owner_run_ready_fibers,
                 close_on_busy_owner_runs_callback_it_finds,
                 close_during_inbox_drain_is_not_slept_on);
    return sp_test_run(s);
}
