/* Fibers you can hold (task.h): handles that never reach another task,
 * wakes that no framework wait absorbs, joins, and interrupts of every
 * kind of wait, from another worker and from a plain thread. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spindle/group.h>
#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/sync.h>
#include <spindle/task.h>
#include <spindle/timer.h>

#include "task_util.h"
#include "testutil.h"

/* ---- handles ------------------------------------------------------------ */

static int answer(void *arg)
{
    return (int)(long)arg;
}

START_TEST(go_join_result_and_name)
{
    sp_iomanager_t *io = io_new(2);
    sp_fiber_t *f = NULL;
    sp_task_opts_t o = {.name = "answer", .stack_size = 256 * 1024};
    ck_assert_int_eq(sp_go(sp_iomanager_scheduler(io), answer, (void *)42L, &o, &f), 0);
    ck_assert_str_eq(sp_fiber_name(f), "answer");
    int result = -1;
    ck_assert_int_eq(sp_fiber_join(f, BOUND_US, &result), 0);
    ck_assert_int_eq(result, 42);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    /* Finished: every operation says so and touches nothing. */
    ck_assert_int_eq(sp_wake(f), -ESRCH);
    ck_assert_int_eq(sp_fiber_interrupt(f, ECANCELED), -ESRCH);
    ck_assert_int_eq(sp_fiber_join(f, 0, &result), 0); /* still joinable */
    ck_assert_int_eq(result, 42);
    sp_fiber_unref(f);
    ck_assert_int_eq(sp_go(sp_iomanager_scheduler(io), NULL, NULL, NULL, NULL), -EINVAL);
    o = (sp_task_opts_t){.bound = true, .worker = 7};
    ck_assert_int_eq(sp_go(sp_iomanager_scheduler(io), answer, NULL, &o, NULL), -EINVAL);
    io_end(io);
}
END_TEST

/* A task started with sp_schedule keeps its fiber object for a handle it
 * takes on itself: later tasks never reuse it. */
static _Atomic(sp_fiber_t *) held;

static void hold_self(void *sem)
{
    sp_fiber_t *self = sp_fiber_current();
    sp_fiber_ref(self);
    atomic_store(&held, self);
    sp_sem_post(sem);
}

static void count_task(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

START_TEST(stale_handle_never_reaches_another_task)
{
    sp_iomanager_t *io = io_new(1);
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    sp_sem_t *done = sp_sem_create(0);
    ck_assert_int_eq(sp_schedule(s, hold_self, done, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_sem_wait(done, BOUND_US), 0);
    sp_fiber_t *old = atomic_load(&held);
    int result = -1;
    ck_assert_int_eq(sp_fiber_join(old, BOUND_US, &result), 0);
    ck_assert_int_eq(result, 0);
    /* Tasks that would have reused a pooled fiber run meanwhile. */
    _Atomic int ran = 0;
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(sp_schedule(s, count_task, &ran, SP_ANY_WORKER), 0);
    sp_fiber_t *f = go_on(io, answer, (void *)7L, -1);
    ck_assert_int_eq(sp_fiber_join(f, BOUND_US, &result), 0);
    ck_assert_int_eq(result, 7);
    ck_assert_ptr_ne(f, old);
    ck_assert_int_eq(sp_wake(old), -ESRCH);
    ck_assert_int_eq(sp_fiber_interrupt(old, EINTR), -ESRCH);
    sp_fiber_unref(old);
    sp_fiber_unref(f);
    sp_sem_destroy(done);
    io_end(io);
    ck_assert_int_eq(atomic_load(&ran), 100);
}
END_TEST

static int park_once(void *arg)
{
    (void)arg;
    return sp_park();
}

static int join_self(void *arg)
{
    (void)arg;
    return sp_fiber_join(sp_fiber_current(), 0, NULL);
}

START_TEST(join_times_out_then_succeeds)
{
    sp_iomanager_t *io = io_new(2);
    sp_fiber_t *f = go_on(io, park_once, NULL, -1);
    int result = -1;
    ck_assert_int_eq(sp_fiber_join(f, 0, &result), -ETIMEDOUT);
    ck_assert_int_eq(sp_fiber_join(f, 20000, &result), -ETIMEDOUT);
    ck_assert_int_eq(sp_wake(f), 0);
    ck_assert_int_eq(sp_fiber_join(f, BOUND_US, &result), 0);
    ck_assert_int_eq(result, 0);
    sp_fiber_unref(f);
    f = go_on(io, join_self, NULL, -1);
    ck_assert_int_eq(sp_fiber_join(f, BOUND_US, &result), 0);
    ck_assert_int_eq(result, -EDEADLK);
    sp_fiber_unref(f);
    io_end(io);
}
END_TEST

/* ---- wakes are kept across framework waits ------------------------------ */

enum { W_SLEEP, W_USLEEP, W_READ, W_IO_WAIT, W_SEM, W_MUTEX, W_CHAN, W_COND, W_KINDS };

typedef struct waitee {
    int kind;
    sp_sem_t *sem, *parked_ok;
    sp_mutex_t *mutex;
    sp_cond_t *cond;
    sp_chan_t *chan;
    int fds[2];
    _Atomic int wait_rc;
    sp_fiber_t *self;
} waitee_t;

/* The wait of kind w->kind; 0 once it ends as it should. */
static int wait_kind(waitee_t *w)
{
    char c;
    int item;
    switch (w->kind) {
    case W_SLEEP: return sp_sleep_us(2000);
    case W_USLEEP: return usleep(2000) == 0 ? 0 : -errno;
    case W_READ: return read(w->fds[0], &c, 1) == 1 ? 0 : -errno;
    case W_IO_WAIT: return sp_io_wait(w->fds[0], SP_IO_READ, SP_FOREVER);
    case W_SEM: return sp_sem_wait(w->sem, SP_FOREVER);
    case W_MUTEX: {
        int rc = sp_mutex_lock(w->mutex);
        if (rc == 0)
            sp_mutex_unlock(w->mutex);
        return rc;
    }
    case W_CHAN: return sp_chan_recv(w->chan, &item, SP_FOREVER);
    case W_COND: {
        sp_mutex_lock(w->mutex);
        int rc = sp_cond_wait(w->cond, w->mutex, SP_FOREVER);
        sp_mutex_unlock(w->mutex);
        return rc;
    }
    }
    return -EINVAL;
}

/* Release the wait of kind w->kind (it may be waiting already or not). */
static void release_kind(waitee_t *w)
{
    int item = 1;
    switch (w->kind) {
    case W_READ:
    case W_IO_WAIT: ck_assert_int_eq(write(w->fds[1], "x", 1), 1); break;
    case W_SEM: sp_sem_post(w->sem); break;
    case W_MUTEX: sp_mutex_unlock(w->mutex); break;
    case W_CHAN: ck_assert_int_eq(sp_chan_send(w->chan, &item, SP_FOREVER), 0); break;
    case W_COND: /* until it has really waited: then it holds no lock */
        sp_mutex_lock(w->mutex);
        sp_cond_signal(w->cond);
        sp_mutex_unlock(w->mutex);
        break;
    default: break; /* sleeps end by themselves */
    }
}

static int waitee_main(void *arg)
{
    waitee_t *w = arg;
    atomic_store(&w->wait_rc, wait_kind(w));
    /* The wake sent during that wait must still be here. */
    int rc = sp_park();
    sp_sem_post(w->parked_ok);
    return rc;
}

static waitee_t *waitee_new(int kind)
{
    static waitee_t w;
    memset(&w, 0, sizeof w);
    w.kind = kind;
    w.sem = sp_sem_create(0);
    w.parked_ok = sp_sem_create(0);
    w.mutex = sp_mutex_create();
    w.cond = sp_cond_create();
    w.chan = sp_chan_create(sizeof(int), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, w.fds), 0);
    return &w;
}

static void waitee_free(waitee_t *w)
{
    sp_sem_destroy(w->sem);
    sp_sem_destroy(w->parked_ok);
    sp_mutex_destroy(w->mutex);
    sp_cond_destroy(w->cond);
    sp_chan_destroy(w->chan);
    close(w->fds[0]);
    close(w->fds[1]);
}

/* On the waitee's worker, after it: it runs once the waitee waits. */
static int waker_main(void *arg)
{
    waitee_t *w = arg;
    ck_assert_int_eq(sp_wake(w->self), 0);
    if (w->kind == W_COND) {
        sp_mutex_lock(w->mutex); /* the waiter released it in cond_wait */
        sp_cond_signal(w->cond);
        sp_mutex_unlock(w->mutex);
    } else {
        release_kind(w);
    }
    return 0;
}

START_TEST(wake_is_kept_across_every_wait_kind)
{
    int kind = _i;
    sp_iomanager_t *io = io_new(1);
    waitee_t *w = waitee_new(kind);
    if (kind == W_MUTEX) /* held by this thread until the waker lets go */
        ck_assert_int_eq(sp_mutex_lock(w->mutex), 0);
    w->self = go_on(io, waitee_main, w, 0);
    if (kind == W_MUTEX) {
        /* The waker (below) cannot unlock a mutex main holds: main does,
         * after the wake was sent. */
        join(go_on(io, answer, NULL, 0)); /* runs once w waits */
        ck_assert_int_eq(sp_wake(w->self), 0);
        ck_assert_int_eq(sp_mutex_unlock(w->mutex), 0);
    } else {
        ck_assert_int_eq(join(go_on(io, waker_main, w, 0)), 0);
    }
    /* The park after the wait returns without another wake. */
    int got = sp_sem_wait(w->parked_ok, BOUND_US);
    if (got != 0)
        sp_wake(w->self); /* let it end, then fail */
    ck_assert_int_eq(got, 0);
    ck_assert_int_eq(join(w->self), 0);
    ck_assert_int_eq(atomic_load(&w->wait_rc), 0);
    waitee_free(w);
    io_end(io);
}
END_TEST

/* ---- deadlines ------------------------------------------------------------ */

#define MS 1000000ull

/* Every wait in a scope ends at its deadline with ETIMEDOUT, never before. */
static int waits_in_scope(void *arg)
{
    (void)arg;
    sp_sem_t *never = sp_sem_create(0);
    int fds[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    sp_deadline_t outer, inner;
    uint64_t at = sp_now_ns() + 20 * MS;
    ck_assert_int_eq(sp_deadline_push(&outer, at), 0);
    /* An inner scope never extends the outer one. */
    ck_assert_int_eq(sp_deadline_push(&inner, at + 1000 * MS), 0);
    ck_assert_uint_eq(sp_deadline_current(), at);
    ck_assert_int_eq(sp_sem_wait(never, SP_FOREVER), -ETIMEDOUT);
    ck_assert_uint_ge(sp_now_ns(), at);
    sp_deadline_pop(&inner);
    /* Past the deadline: every wait ends at once. */
    char c;
    errno = 0;
    ck_assert_int_eq(read(fds[0], &c, 1), -1);
    ck_assert_int_eq(errno, ETIMEDOUT);
    ck_assert_int_eq(sp_sleep_us(1000000), -ETIMEDOUT);
    ck_assert_int_eq(sp_park(), -ETIMEDOUT);
    sp_deadline_pop(&outer);
    ck_assert_uint_eq(sp_deadline_current(), 0);
    ck_assert_int_eq(sp_sleep_us(1000), 0); /* no deadline any more */
    /* So does a hooked poll, which would have waited a minute. */
    at = sp_now_ns() + 20 * MS;
    ck_assert_int_eq(sp_deadline_push(&outer, at), 0);
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    ck_assert_int_eq(poll(&pfd, 1, 60000), -1);
    ck_assert_int_eq(errno, ETIMEDOUT);
    ck_assert_uint_ge(sp_now_ns(), at);
    sp_deadline_pop(&outer);
    /* A hooked read in a fresh scope ends at its deadline. */
    at = sp_now_ns() + 20 * MS;
    ck_assert_int_eq(sp_deadline_push(&outer, at), 0);
    ck_assert_int_eq(read(fds[0], &c, 1), -1);
    ck_assert_int_eq(errno, ETIMEDOUT);
    ck_assert_uint_ge(sp_now_ns(), at);
    sp_deadline_pop(&outer);
    close(fds[0]);
    close(fds[1]);
    sp_sem_destroy(never);
    return 0;
}

START_TEST(deadline_scope_ends_every_wait)
{
    sp_iomanager_t *io = io_new(1);
    ck_assert_int_eq(join(go_on(io, waits_in_scope, NULL, -1)), 0);
    sp_deadline_t d;
    ck_assert_int_eq(sp_deadline_push(&d, sp_now_ns()), -EPERM); /* not a task */
    io_end(io);
}
END_TEST

static int sleep_long(void *arg)
{
    (void)arg;
    return sp_sleep_us(60 * 1000000ull);
}

/* Tasks and groups started in a scope run inside its deadline. */
static int start_in_scope(void *io)
{
    sp_deadline_t d;
    uint64_t at = sp_now_ns() + 20 * MS;
    ck_assert_int_eq(sp_deadline_push(&d, at), 0);
    sp_fiber_t *child = go_on(io, sleep_long, NULL, -1);
    sp_group_t *g = sp_group_create(sp_iomanager_scheduler(io), "scoped", 2);
    sp_deadline_pop(&d);
    ck_assert_int_eq(sp_group_add(g, sleep_long, NULL), 0);
    sp_group_failure_t f;
    ck_assert_int_eq(sp_group_wait(g, BOUND_US, &f), -ECANCELED);
    ck_assert_int_eq(f.code, -ETIMEDOUT);
    ck_assert_uint_ge(sp_now_ns(), at);
    sp_group_destroy(g);
    return join(child);
}

START_TEST(deadline_inherited_by_tasks_and_groups)
{
    sp_iomanager_t *io = io_new(2);
    ck_assert_int_eq(join(go_on(io, start_in_scope, io, -1)), -ETIMEDOUT);
    io_end(io);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("task");
    SP_TEST_CASE(s, "handles", 30, NULL, NULL, go_join_result_and_name,
                 stale_handle_never_reaches_another_task, join_times_out_then_succeeds);
    SP_TEST_CASE(s, "deadlines", 30, NULL, NULL, deadline_scope_ends_every_wait,
                 deadline_inherited_by_tasks_and_groups);
    TCase *tc = tcase_create("wakes");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, wake_is_kept_across_every_wait_kind, 0, W_KINDS);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
