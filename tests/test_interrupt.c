/* sp_fiber_interrupt (task.h): every kind of wait ends with the
 * interrupt's error, from another worker and from a plain thread; an
 * interrupt sent while the fiber runs ends its next wait; and an interrupt
 * racing with the wait's own completion (a semaphore, a park, a socket's
 * read) has exactly one outcome. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <spindle/group.h>
#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/sync.h>
#include <spindle/task.h>
#include <spindle/timer.h>

#include "task_util.h"
#include "testutil.h"

/* ---- every wait kind ---------------------------------------------------- */

enum {
    K_SLEEP, K_USLEEP, K_NANOSLEEP, K_CLOCK_NANOSLEEP, K_READ, K_POLL, K_IO_WAIT, K_PARK, K_SEM, K_MUTEX, K_COND,
    K_CHAN, K_JOIN, K_GROUP, K_BLOCKING, K_KINDS
};

typedef struct target {
    int kind;
    int fds[2];
    sp_sem_t *sem;
    sp_mutex_t *mutex;
    sp_cond_t *cond;
    sp_chan_t *chan;
    sp_fiber_t *parked; /* K_JOIN: a fiber that parks until woken */
    sp_group_t *group;
    sem_t helper_go, helper_done; /* K_BLOCKING: the helper's call */
    _Atomic int helper_ran;
    bool cond_relocked;
} target_t;

static int park_until_woken(void *arg)
{
    (void)arg;
    return sp_park();
}

static int job_waits_on_sem(void *arg)
{
    return sp_sem_wait(arg, SP_FOREVER);
}

static void blocking_call(void *arg)
{
    target_t *t = arg;
    while (sem_wait(&t->helper_go) != 0)
        ;
    atomic_store(&t->helper_ran, 1);
    sem_post(&t->helper_done);
}

/* The wait; what it returned, as -errno. */
static int wait_kind(target_t *t)
{
    char c;
    int item;
    switch (t->kind) {
    case K_SLEEP: return sp_sleep_us(60 * 1000000ull);
    case K_USLEEP: return usleep(60 * 1000000) == 0 ? 0 : -errno;
    case K_NANOSLEEP: {
        struct timespec req = {60, 0}, rem = {0, 0};
        int rc = nanosleep(&req, &rem) == 0 ? 0 : -errno;
        /* Cut short: the time left, as for a signal. */
        return rc == -EINTR && rem.tv_sec > 0 && rem.tv_sec <= 60 ? rc : -EPROTO;
    }
    case K_CLOCK_NANOSLEEP: { /* returns the error number */
        struct timespec req = {60, 0};
        return -clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
    }
    case K_READ: return read(t->fds[0], &c, 1) >= 0 ? 0 : -errno;
    case K_POLL: {
        struct pollfd pfd = {.fd = t->fds[0], .events = POLLIN};
        return poll(&pfd, 1, 60000) >= 0 ? 0 : -errno;
    }
    case K_IO_WAIT: return sp_io_wait(t->fds[0], SP_IO_READ, SP_FOREVER);
    case K_PARK: return sp_park();
    case K_SEM: return sp_sem_wait(t->sem, SP_FOREVER);
    case K_MUTEX: return sp_mutex_lock(t->mutex); /* held by main */
    case K_COND: {
        ck_assert_int_eq(sp_mutex_lock(t->mutex), 0);
        int rc = sp_cond_wait(t->cond, t->mutex, SP_FOREVER);
        t->cond_relocked = sp_mutex_unlock(t->mutex) == 0;
        return rc;
    }
    case K_CHAN: return sp_chan_recv(t->chan, &item, SP_FOREVER);
    case K_JOIN: return sp_fiber_join(t->parked, SP_FOREVER, NULL);
    case K_GROUP: return sp_group_wait(t->group, SP_FOREVER, NULL);
    case K_BLOCKING: return sp_run_blocking(blocking_call, t);
    }
    return -EINVAL;
}

static int target_main(void *arg)
{
    return wait_kind(arg);
}

/* On the target's worker, queued after it: runs once the target waits. */
static int waiting_now(void *sem)
{
    return sp_sem_post(sem);
}

static int interrupter(void *arg)
{
    void **a = arg;
    ck_assert_int_eq(sp_sem_wait(a[1], BOUND_US), 0);
    return sp_fiber_interrupt(a[0], ECANCELED);
}

static void target_setup(target_t *t, sp_iomanager_t *io, int kind)
{
    memset(t, 0, sizeof *t);
    t->kind = kind;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, t->fds), 0);
    t->sem = sp_sem_create(0);
    t->mutex = sp_mutex_create();
    t->cond = sp_cond_create();
    t->chan = sp_chan_create(sizeof(int), 0);
    sem_init(&t->helper_go, 0, 0);
    sem_init(&t->helper_done, 0, 0);
    if (kind == K_MUTEX)
        ck_assert_int_eq(sp_mutex_lock(t->mutex), 0);
    if (kind == K_JOIN)
        t->parked = go_on(io, park_until_woken, NULL, 1);
    if (kind == K_GROUP) {
        t->group = sp_group_create(sp_iomanager_scheduler(io), "g", 1);
        ck_assert_int_eq(sp_group_add(t->group, job_waits_on_sem, t->sem), 0);
        ck_assert_int_eq(sp_group_start(t->group), 0);
    }
}

static void target_teardown(target_t *t)
{
    if (t->kind == K_MUTEX)
        ck_assert_int_eq(sp_mutex_unlock(t->mutex), 0);
    if (t->kind == K_JOIN) {
        ck_assert_int_eq(sp_wake(t->parked), 0);
        join(t->parked);
    }
    if (t->kind == K_GROUP) {
        sp_sem_post(t->sem);
        ck_assert_int_eq(sp_group_wait(t->group, BOUND_US, NULL), 0);
        sp_group_destroy(t->group);
    }
    if (t->kind == K_BLOCKING) { /* the helper still ends its call */
        sem_post(&t->helper_go);
        ck_assert_int_eq(sem_wait(&t->helper_done), 0);
        ck_assert_int_eq(atomic_load(&t->helper_ran), 1);
    }
    close(t->fds[0]);
    close(t->fds[1]);
    sp_sem_destroy(t->sem);
    sp_mutex_destroy(t->mutex);
    sp_cond_destroy(t->cond);
    sp_chan_destroy(t->chan);
    sem_destroy(&t->helper_go);
    sem_destroy(&t->helper_done);
}

/* _i: kind * 2 + (0: from a fiber on the other worker, 1: from main). */
START_TEST(interrupt_ends_every_wait_kind)
{
    int kind = _i / 2;
    bool from_thread = _i % 2;
    sp_iomanager_t *io = io_new(2);
    static target_t t;
    target_setup(&t, io, kind);
    sp_sem_t *waiting = sp_sem_create(0);
    sp_fiber_t *f = go_on(io, target_main, &t, 0);
    sp_fiber_unref(go_on(io, waiting_now, waiting, 0));
    if (from_thread) {
        ck_assert_int_eq(sp_sem_wait(waiting, BOUND_US), 0);
        ck_assert_int_eq(sp_fiber_interrupt(f, ECANCELED), 0);
    } else {
        void *args[2] = {f, waiting};
        ck_assert_int_eq(join(go_on(io, interrupter, args, 1)), 0);
    }
    int rc = join(f);
    /* Hooked calls fail with errno = err; the sleep family with EINTR. */
    bool sleep_family = kind == K_USLEEP || kind == K_NANOSLEEP || kind == K_CLOCK_NANOSLEEP;
    ck_assert_int_eq(rc, sleep_family ? -EINTR : -ECANCELED);
    if (kind == K_COND)
        ck_assert(t.cond_relocked); /* the mutex was held again */
    target_teardown(&t);
    sp_sem_destroy(waiting);
    io_end(io);
}
END_TEST

/* ---- an interrupt while running ------------------------------------------ */

static int interrupt_self_then_wait(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_fiber_interrupt(sp_fiber_current(), ETIMEDOUT), 0);
    sp_yield(); /* running, not waiting: the interrupt stays pending */
    int first = sp_sleep_us(60 * 1000000ull);
    int second = sp_sleep_us(1000); /* consumed: this one sleeps */
    return first == -ETIMEDOUT && second == 0 ? 0 : -1;
}

START_TEST(interrupt_while_running_ends_next_wait)
{
    sp_iomanager_t *io = io_new(1);
    ck_assert_int_eq(join(go_on(io, interrupt_self_then_wait, NULL, 0)), 0);
    ck_assert_int_eq(sp_fiber_interrupt(NULL, EINTR), -EINVAL);
    io_end(io);
}
END_TEST

/* ---- races: exactly one outcome each ---------------------------------- */

#define ROUNDS 100000
/* A hooked read's round costs more (a membarrier for the interrupt). */
#define READ_ROUNDS 25000

enum { RACE_SEM, RACE_PARK, RACE_READ };

typedef struct race {
    int kind, rounds;
    sp_sem_t *sem;       /* the target's wait (RACE_SEM) */
    int fds[2];          /* RACE_READ: the target reads fds[0] */
    sp_sem_t *round_go;  /* the other side starts a round */
    sp_sem_t *round_end; /* the target took both outcomes */
    sp_fiber_t *target;
    _Atomic int bad;
} race_t;

/* One wait of the target: 0 (completed) or -errno. RACE_READ is a hooked
 * read of one byte: its watch's own thread arms it and the poll takes it
 * (the watch lock's fast side) while the interrupt comes from the other
 * worker's thread. */
static int race_wait(race_t *r)
{
    if (r->kind == RACE_PARK)
        return sp_park();
    if (r->kind == RACE_SEM)
        return sp_sem_wait(r->sem, SP_FOREVER);
    char c;
    ssize_t n = read(r->fds[0], &c, 1);
    return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

/* Each round gets one completion (a post, a wake, a byte) and one
 * interrupt, racing; the target must see each exactly once. */
static int race_target(void *arg)
{
    race_t *r = arg;
    for (int i = 0; i < r->rounds; i++) {
        sp_sem_post(r->round_go);
        int done = 0, intr = 0;
        while (done + intr < 2) {
            int rc = race_wait(r);
            if (rc == 0)
                done++;
            else if (rc == -ECANCELED)
                intr++;
            else
                atomic_store(&r->bad, rc);
        }
        if (done != 1 || intr != 1) {
            fprintf(stderr, "round %d: %d completions, %d interrupts\n", i, done, intr);
            atomic_store(&r->bad, 1);
        }
        sp_sem_post(r->round_end);
    }
    return 0;
}

static int race_driver(void *arg)
{
    race_t *r = arg;
    for (int i = 0; i < r->rounds; i++) {
        ck_assert_int_eq(sp_sem_wait(r->round_go, BOUND_US), 0);
        if (i & 1)
            ck_assert_int_eq(sp_fiber_interrupt(r->target, ECANCELED), 0);
        if (r->kind == RACE_PARK)
            ck_assert_int_eq(sp_wake(r->target), 0);
        else if (r->kind == RACE_SEM)
            sp_sem_post(r->sem);
        else
            ck_assert_int_eq(send(r->fds[1], "x", 1, MSG_DONTWAIT), 1);
        if (!(i & 1))
            ck_assert_int_eq(sp_fiber_interrupt(r->target, ECANCELED), 0);
        ck_assert_int_eq(sp_sem_wait(r->round_end, BOUND_US), 0);
    }
    return 0;
}

START_TEST(interrupt_races_completion_with_one_outcome)
{
    sp_iomanager_t *io = io_new(2);
    static race_t r;
    memset(&r, 0, sizeof r);
    r.kind = _i;
    r.rounds = r.kind == RACE_READ ? READ_ROUNDS : ROUNDS;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, r.fds), 0);
    r.sem = sp_sem_create(0);
    r.round_go = sp_sem_create(0);
    r.round_end = sp_sem_create(0);
    r.target = go_on(io, race_target, &r, 0);
    /* Rounds are short; the bound is for a loaded machine. */
    ck_assert_int_eq(join_within(go_on(io, race_driver, &r, 1), 200 * 1000000LL), 0);
    ck_assert_int_eq(join(r.target), 0);
    ck_assert_int_eq(atomic_load(&r.bad), 0);
    close(r.fds[0]);
    close(r.fds[1]);
    sp_sem_destroy(r.sem);
    sp_sem_destroy(r.round_go);
    sp_sem_destroy(r.round_end);
    io_end(io);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("interrupt");
    TCase *tc = tcase_create("kinds");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, interrupt_ends_every_wait_kind, 0, 2 * K_KINDS);
    tcase_add_test(tc, interrupt_while_running_ends_next_wait);
    suite_add_tcase(s, tc);
    tc = tcase_create("races");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, interrupt_races_completion_with_one_outcome, RACE_SEM, RACE_READ + 1);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
