/* Sync primitives, the message passing: channels and select, timed waits
 * that never return early, and the direct hand-off that leaves room for
 * timers and fds; in fibers on several workers and in plain threads.
 * Every wait is bounded by an event or a timeout; nothing sleeps and
 * hopes. */
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

/* ---- channels ------------------------------------------------------------ */

enum { SENDERS = 4, PER_SENDER = 5000 };
typedef struct msg {
    int sender, seq;
} msg_t;

static sp_chan_t *ch;
static _Atomic int chan_bad, chan_got;

static void chan_sender(void *arg)
{
    int id = (int)(long)arg;
    for (int i = 0; i < PER_SENDER; i++) {
        msg_t m = {id, i};
        ck_assert_int_eq(sp_chan_send(ch, &m, SP_FOREVER), 0);
    }
}

static void chan_receiver(void *arg)
{
    int *next = arg; /* per sender: the seq expected next */
    msg_t m;
    for (int i = 0; i < SENDERS * PER_SENDER; i++) {
        ck_assert_int_eq(sp_chan_recv(ch, &m, SP_FOREVER), 0);
        if (m.seq != next[m.sender])
            atomic_fetch_add(&chan_bad, 1);
        next[m.sender] = m.seq + 1;
        atomic_fetch_add(&chan_got, 1);
    }
}

static void chan_order_run(size_t capacity)
{
    ch = sp_chan_create(sizeof(msg_t), capacity);
    ck_assert_ptr_nonnull(ch);
    atomic_store(&chan_bad, 0);
    atomic_store(&chan_got, 0);
    int next[SENDERS] = {0};
    sp_scheduler_t *s = sp_scheduler_create("chan", 2, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    ck_assert_int_eq(sp_schedule(s, chan_receiver, next, 0), 0);
    for (long i = 0; i < SENDERS; i++)
        ck_assert_int_eq(sp_schedule(s, chan_sender, (void *)i, (int)(i % 2)),
                         0);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(atomic_load(&chan_got), SENDERS * PER_SENDER);
    ck_assert_int_eq(atomic_load(&chan_bad), 0);
    ck_assert_uint_eq(sp_chan_len(ch), 0);
    sp_chan_destroy(ch);
}

START_TEST(chan_fifo_per_sender)
{
    chan_order_run(8);
    chan_order_run(1);
    chan_order_run(0); /* unbuffered */
    chan_order_run(SP_CHAN_UNBOUNDED);
}
END_TEST

START_TEST(chan_unbounded_never_blocks)
{
    ch = sp_chan_create(sizeof(int), SP_CHAN_UNBOUNDED);
    for (int i = 0; i < 100000; i++)
        ck_assert_int_eq(sp_chan_trysend(ch, &i), 0);
    ck_assert_uint_eq(sp_chan_len(ch), 100000);
    for (int i = 0; i < 50000; i++) { /* wrap the ring, then grow again */
        int v;
        ck_assert_int_eq(sp_chan_tryrecv(ch, &v), 0);
        ck_assert_int_eq(v, i);
    }
    for (int i = 100000; i < 200000; i++)
        ck_assert_int_eq(sp_chan_send(ch, &i, 0), 0);
    for (int i = 50000; i < 200000; i++) {
        int v;
        ck_assert_int_eq(sp_chan_recv(ch, &v, SP_FOREVER), 0);
        ck_assert_int_eq(v, i);
    }
    int v;
    ck_assert_int_eq(sp_chan_tryrecv(ch, &v), -EAGAIN);
    sp_chan_destroy(ch);
}
END_TEST

/* Close: buffered items drain, then -EPIPE; blocked senders and
 * receivers are woken with -EPIPE. */
static _Atomic int close_rc[4];
static sp_sem_t *close_parked;

static void close_blocked_sender(void *arg)
{
    int i = (int)(long)arg, v = 99;
    atomic_store(&close_rc[i], sp_chan_send(ch, &v, SP_FOREVER));
}

static void close_blocked_receiver(void *arg)
{
    int i = (int)(long)arg, v;
    atomic_store(&close_rc[i], sp_chan_recv(ch, &v, SP_FOREVER));
}

START_TEST(chan_close_semantics)
{
    /* Full bounded channel with two senders blocked. */
    ch = sp_chan_create(sizeof(int), 2);
    close_parked = sp_sem_create(0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(sp_chan_send(ch, &i, 0), 0);
    int v = 7;
    ck_assert_int_eq(sp_chan_trysend(ch, &v), -EAGAIN);
    sp_scheduler_t *s = sp_scheduler_create("close", 1, false);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    for (long i = 0; i < 2; i++) {
        atomic_store(&close_rc[i], 1);
        ck_assert_int_eq(sp_schedule(s, close_blocked_sender, (void *)i, 0), 0);
    }
    ck_assert_int_eq(sp_schedule(s, marker, close_parked, 0), 0);
    ck_assert_int_eq(sp_sem_wait(close_parked, SP_FOREVER), 0);
    ck_assert_int_eq(atomic_load(&close_rc[0]), 1); /* parked in send */
    ck_assert_int_eq(sp_chan_close(ch), 0);
    ck_assert_int_eq(sp_chan_close(ch), -EALREADY);
    ck_assert(sp_chan_closed(ch));
    ck_assert_int_eq(sp_chan_send(ch, &v, SP_FOREVER), -EPIPE);
    ck_assert_int_eq(sp_chan_trysend(ch, &v), -EPIPE);
    for (int i = 0; i < 2; i++) { /* the buffer drains, without 99s */
        ck_assert_int_eq(sp_chan_recv(ch, &v, SP_FOREVER), 0);
        ck_assert_int_eq(v, i);
    }
    ck_assert_int_eq(sp_chan_recv(ch, &v, SP_FOREVER), -EPIPE);
    ck_assert_int_eq(sp_chan_tryrecv(ch, &v), -EPIPE);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    ck_assert_int_eq(atomic_load(&close_rc[0]), -EPIPE);
    ck_assert_int_eq(atomic_load(&close_rc[1]), -EPIPE);
    sp_chan_destroy(ch);

    /* Empty channels (buffered and not) with receivers blocked. */
    for (size_t cap = 0; cap < 2; cap++) {
        ch = sp_chan_create(sizeof(int), cap);
        s = sp_scheduler_create("close2", 1, false);
        ck_assert_int_eq(sp_scheduler_start(s), 0);
        for (long i = 0; i < 4; i++) {
            atomic_store(&close_rc[i], 1);
            ck_assert_int_eq(
                sp_schedule(s, close_blocked_receiver, (void *)i, 0), 0);
        }
        ck_assert_int_eq(sp_schedule(s, marker, close_parked, 0), 0);
        ck_assert_int_eq(sp_sem_wait(close_parked, SP_FOREVER), 0);
        ck_assert_int_eq(sp_chan_close(ch), 0);
        ck_assert_int_eq(sp_scheduler_stop(s), 0);
        sp_scheduler_destroy(s);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(atomic_load(&close_rc[i]), -EPIPE);
        sp_chan_destroy(ch);
    }
    sp_sem_destroy(close_parked);
}
END_TEST

static _Atomic int tr_rc = 1;
static _Atomic uint64_t tr_elapsed;

static void chan_timed_recv(void *arg)
{
    (void)arg;
    int v;
    uint64_t t0 = now_us();
    atomic_store(&tr_rc, sp_chan_recv(ch, &v, 20000));
    atomic_store(&tr_elapsed, now_us() - t0);
}

START_TEST(chan_recv_timeout)
{
    ch = sp_chan_create(sizeof(int), 1);
    sp_iomanager_t *io = io_new(1);
    go(io, chan_timed_recv, NULL, 0);
    io_end(io); /* the timer keeps it alive until the wait ends */
    ck_assert_int_eq(atomic_load(&tr_rc), -ETIMEDOUT);
    ck_assert_uint_ge(atomic_load(&tr_elapsed), 20000);
    /* The timed-out receiver left no trace: a send buffers. */
    int v = 5;
    ck_assert_int_eq(sp_chan_trysend(ch, &v), 0);
    ck_assert_uint_eq(sp_chan_len(ch), 1);
    /* Plain thread. */
    ck_assert_int_eq(sp_chan_recv(ch, &v, 20000), 0);
    uint64_t t0 = now_us();
    ck_assert_int_eq(sp_chan_recv(ch, &v, 20000), -ETIMEDOUT);
    ck_assert_uint_ge(now_us() - t0, 20000);
    sp_chan_destroy(ch);
}
END_TEST

/* ---- select -------------------------------------------------------------- */

START_TEST(select_fair_between_ready_channels)
{
    enum { ROUNDS = 20000 };
    sp_chan_t *a = sp_chan_create(sizeof(int), SP_CHAN_UNBOUNDED);
    sp_chan_t *b = sp_chan_create(sizeof(int), SP_CHAN_UNBOUNDED);
    for (int i = 0; i < ROUNDS; i++) {
        ck_assert_int_eq(sp_chan_send(a, &i, 0), 0);
        ck_assert_int_eq(sp_chan_send(b, &i, 0), 0);
    }
    int va, vb, count[2] = {0, 0}, next[2] = {0, 0};
    sp_chan_op_t ops[2] = {{a, SP_CHAN_RECV, &va, 0}, {b, SP_CHAN_RECV, &vb, 0}};
    for (int i = 0; i < ROUNDS; i++) {
        int k = sp_chan_select(ops, 2, 0);
        ck_assert(k == 0 || k == 1);
        ck_assert_int_eq(ops[k].result, 0);
        ck_assert_int_eq(k ? vb : va, next[k]++); /* FIFO per channel */
        count[k]++;
    }
    /* Both always ready: each gets about half (binomial, sd ~71). */
    ck_assert_int_gt(count[0], ROUNDS * 45 / 100);
    ck_assert_int_gt(count[1], ROUNDS * 45 / 100);
    sp_chan_destroy(a);
    sp_chan_destroy(b);
}
END_TEST

static sp_chan_t *sa, *sb;
static _Atomic int sel_idx = -9, sel_val;

static void select_waiter(void *arg)
{
    (void)arg;
    int va = 0, vb = 0;
    sp_chan_op_t ops[3] = {{sa, SP_CHAN_RECV, &va, 0},
                           {NULL, SP_CHAN_RECV, NULL, 0},
                           {sb, SP_CHAN_RECV, &vb, 0}};
    int k = sp_chan_select(ops, 3, SP_FOREVER);
    atomic_store(&sel_val, k == 0 ? va : vb);
    atomic_store(&sel_idx, k);
}

static void select_sender(void *arg)
{
    (void)arg;
    int v = 42;
    ck_assert_int_eq(sp_chan_send(sb, &v, SP_FOREVER), 0);
    /* Only one case completed: a is untouched, so this buffers. */
    ck_assert_int_eq(sp_chan_trysend(sa, &v), 0);
}

START_TEST(select_blocks_then_one_case)
{
    sa = sp_chan_create(sizeof(int), 1);
    sb = sp_chan_create(sizeof(int), 0);
    sp_iomanager_t *io = io_new(2);
    go(io, select_waiter, NULL, 0);
    go(io, select_sender, NULL, 1);
    io_end(io);
    ck_assert_int_eq(atomic_load(&sel_idx), 2);
    ck_assert_int_eq(atomic_load(&sel_val), 42);
    ck_assert_uint_eq(sp_chan_len(sa), 1);
    sp_chan_destroy(sa);
    sp_chan_destroy(sb);
}
END_TEST

/* Many selecting receivers and plain senders on two channels: every item
 * is received exactly once (no case completes twice, none is lost). */
enum { SEL_ITEMS = 20000, SEL_RECEIVERS = 6 };
static _Atomic int sel_seen[2 * SEL_ITEMS], sel_total;

static void sel_receiver(void *arg)
{
    (void)arg;
    for (;;) {
        int va, vb;
        sp_chan_op_t ops[2] = {{sa, SP_CHAN_RECV, &va, 0},
                               {sb, SP_CHAN_RECV, &vb, 0}};
        int k = sp_chan_select(ops, 2, SP_FOREVER);
        ck_assert(k == 0 || k == 1);
        if (ops[k].result == -EPIPE)
            return; /* that one is closed and drained: the other follows */
        atomic_fetch_add(&sel_seen[k ? vb : va], 1);
        if (atomic_fetch_add(&sel_total, 1) + 1 == 2 * SEL_ITEMS) {
            sp_chan_close(sa);
            sp_chan_close(sb);
        }
    }
}

static void sel_sender(void *arg)
{
    long which = (long)arg;
    sp_chan_t *c = which ? sb : sa;
    for (int i = 0; i < SEL_ITEMS; i++) {
        int v = (int)which * SEL_ITEMS + i;
        ck_assert_int_eq(sp_chan_send(c, &v, SP_FOREVER), 0);
    }
}

START_TEST(select_stress_exactly_once)
{
    size_t caps[] = {0, 4};
    for (int r = 0; r < 2; r++) {
        sa = sp_chan_create(sizeof(int), caps[r]);
        sb = sp_chan_create(sizeof(int), caps[r]);
        memset(sel_seen, 0, sizeof sel_seen);
        atomic_store(&sel_total, 0);
        sp_scheduler_t *s = sp_scheduler_create("sel", 2, false);
        ck_assert_int_eq(sp_scheduler_start(s), 0);
        for (int i = 0; i < SEL_RECEIVERS; i++)
            ck_assert_int_eq(sp_schedule(s, sel_receiver, NULL, i % 2), 0);
        for (long i = 0; i < 2; i++)
            ck_assert_int_eq(sp_schedule(s, sel_sender, (void *)i, (int)i), 0);
        ck_assert_int_eq(sp_scheduler_stop(s), 0);
        sp_scheduler_destroy(s);
        for (int i = 0; i < 2 * SEL_ITEMS; i++)
            ck_assert_int_eq(atomic_load(&sel_seen[i]), 1);
        sp_chan_destroy(sa);
        sp_chan_destroy(sb);
    }
}
END_TEST

START_TEST(select_send_timeout_and_closed)
{
    sp_chan_t *full = sp_chan_create(sizeof(int), 1);
    sp_chan_t *shut = sp_chan_create(sizeof(int), 1);
    int v = 1, out = 0;
    ck_assert_int_eq(sp_chan_send(full, &v, 0), 0);
    sp_chan_op_t ops[2] = {{full, SP_CHAN_SEND, &v, 0},
                           {shut, SP_CHAN_RECV, &out, 0}};
    ck_assert_int_eq(sp_chan_select(ops, 2, 0), -ETIMEDOUT);
    uint64_t t0 = now_us();
    ck_assert_int_eq(sp_chan_select(ops, 2, 15000), -ETIMEDOUT);
    ck_assert_uint_ge(now_us() - t0, 15000);
    /* A closed channel is ready, with -EPIPE. */
    ck_assert_int_eq(sp_chan_close(shut), 0);
    ck_assert_int_eq(sp_chan_select(ops, 2, SP_FOREVER), 1);
    ck_assert_int_eq(ops[1].result, -EPIPE);
    /* A send case completes when there is room. */
    ck_assert_int_eq(sp_chan_recv(full, &out, 0), 0);
    sp_chan_op_t send_only[1] = {{full, SP_CHAN_SEND, &v, 0}};
    ck_assert_int_eq(sp_chan_select(send_only, 1, SP_FOREVER), 0);
    ck_assert_int_eq(send_only[0].result, 0);
    ck_assert_uint_eq(sp_chan_len(full), 1);
    /* Bad arguments. */
    sp_chan_op_t none[1] = {{NULL, SP_CHAN_RECV, NULL, 0}};
    ck_assert_int_eq(sp_chan_select(none, 1, SP_FOREVER), -EINVAL);
    ck_assert_int_eq(sp_chan_select(none, 1, 0), -ETIMEDOUT);
    ck_assert_int_eq(sp_chan_select(ops, 0, 0), -EINVAL);
    sp_chan_op_t bad[1] = {{full, 7, &v, 0}};
    ck_assert_int_eq(sp_chan_select(bad, 1, 0), -EINVAL);
    sp_chan_destroy(full);
    sp_chan_destroy(shut);
}
END_TEST

/* ---- timed waits never return early, in fibers ---------------------------- */

enum { EARLY_US = 3000, EARLY_KINDS = 9 };
static _Atomic int early_bad, early_done;
static sp_mutex_t *early_m;   /* held by the test thread throughout */
static sp_rwlock_t *early_rw; /* write held by the test thread */

static void early_fiber(void *arg)
{
    (void)arg;
    sp_mutex_t *m = sp_mutex_create();
    sp_cond_t *c = sp_cond_create();
    sp_sem_t *s = sp_sem_create(0);
    sp_wg_t *g = sp_wg_create();
    sp_chan_t *q = sp_chan_create(sizeof(int), 0);
    sp_wg_add(g, 1);
    int v = 0;
    for (int round = 0; round < 3; round++) {
        int64_t t = EARLY_US * (round + 1);
        for (int k = 0; k < EARLY_KINDS; k++) {
            uint64_t t0 = now_us();
            int rc;
            switch (k) {
            case 0:
                sp_mutex_lock(m);
                rc = sp_cond_wait(c, m, t);
                sp_mutex_unlock(m);
                break;
            case 1: rc = sp_sem_wait(s, t); break;
            case 2: rc = sp_wg_wait(g, t); break;
            case 3: rc = sp_chan_recv(q, &v, t); break;
            case 4: rc = sp_chan_send(q, &v, t); break;
            case 5: {
                sp_chan_op_t op = {q, SP_CHAN_RECV, &v, 0};
                rc = sp_chan_select(&op, 1, t);
                break;
            }
            case 6: rc = sp_mutex_timedlock(early_m, t); break;
            case 7: rc = sp_rwlock_rdlock(early_rw, t); break;
            default: rc = sp_rwlock_wrlock(early_rw, t); break;
            }
            if (rc != -ETIMEDOUT || now_us() - t0 < (uint64_t)t)
                atomic_fetch_add(&early_bad, 1);
        }
    }
    sp_chan_destroy(q);
    sp_wg_destroy(g);
    sp_sem_destroy(s);
    sp_cond_destroy(c);
    sp_mutex_destroy(m);
    atomic_fetch_add(&early_done, 1);
}

START_TEST(timed_waits_never_early)
{
    early_m = sp_mutex_create();
    early_rw = sp_rwlock_create();
    ck_assert_int_eq(sp_mutex_lock(early_m), 0);
    ck_assert_int_eq(sp_rwlock_wrlock(early_rw, SP_FOREVER), 0);
    sp_iomanager_t *io = io_new(2);
    for (int i = 0; i < 8; i++)
        go(io, early_fiber, NULL, i % 2);
    io_end(io);
    ck_assert_int_eq(atomic_load(&early_done), 8);
    ck_assert_int_eq(atomic_load(&early_bad), 0);
    ck_assert_int_eq(sp_mutex_unlock(early_m), 0);
    ck_assert_int_eq(sp_rwlock_unlock(early_rw), 0);
    sp_mutex_destroy(early_m);
    sp_rwlock_destroy(early_rw);
}
END_TEST

/* ---- direct hand-off ------------------------------------------------------
 * Two fibers in a channel ping-pong on one worker hand the thread straight
 * to each other, never returning to the worker loop on their own: the loop
 * must still get its turn to poll, or a timer and an fd wait on the same
 * worker would starve. The ping-pong runs until the waiting fiber has seen
 * both, or gives up after HP_LIMIT_NS (the failure). */

enum { HP_LIMIT_NS = 10 * 1000 * 1000 * 1000LL };

static sp_chan_t *hp_ping, *hp_pong, *hp_started;
static _Atomic int hp_stop, hp_slept, hp_read, hp_stopped;
static _Atomic long hp_rounds;
static int hp_fds[2];

static void hp_pinger(void *arg)
{
    (void)arg;
    int one = 1;
    ck_assert_int_eq(sp_chan_send(hp_started, &one, SP_FOREVER), 0);
    uint64_t t0 = sp_now_ns();
    long v = 0;
    while (!atomic_load(&hp_stop) &&
           ((v & 1023) || sp_now_ns() - t0 < HP_LIMIT_NS)) {
        ck_assert_int_eq(sp_chan_send(hp_ping, &v, SP_FOREVER), 0);
        ck_assert_int_eq(sp_chan_recv(hp_pong, &v, SP_FOREVER), 0);
        v++;
    }
    atomic_store(&hp_rounds, v);
    atomic_store(&hp_stopped, atomic_load(&hp_stop)); /* not by the limit */
    v = -1; /* ends the ponger */
    ck_assert_int_eq(sp_chan_send(hp_ping, &v, SP_FOREVER), 0);
}

static void hp_ponger(void *arg)
{
    (void)arg;
    long v;
    for (;;) {
        ck_assert_int_eq(sp_chan_recv(hp_ping, &v, SP_FOREVER), 0);
        if (v < 0)
            break;
        ck_assert_int_eq(sp_chan_send(hp_pong, &v, SP_FOREVER), 0);
    }
}

static void hp_waiter(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_sleep_us(2000), 0);
    atomic_store(&hp_slept, 1);
    if (sp_io_wait(hp_fds[0], SP_IO_READ, HP_LIMIT_NS / 1000) == 0)
        atomic_store(&hp_read, 1);
    atomic_store(&hp_stop, 1);
}

START_TEST(handoff_leaves_room_for_timers_and_fds)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, hp_fds), 0);
    hp_ping = sp_chan_create(sizeof(long), 0);
    hp_pong = sp_chan_create(sizeof(long), 0);
    hp_started = sp_chan_create(sizeof(int), 1);
    sp_iomanager_t *io = io_new(1);
    go(io, hp_waiter, NULL, 0);
    go(io, hp_pinger, NULL, 0);
    go(io, hp_ponger, NULL, 0);
    int one;
    ck_assert_int_eq(sp_chan_recv(hp_started, &one, HP_LIMIT_NS / 1000), 0);
    ck_assert_int_eq(write(hp_fds[1], "x", 1), 1);
    io_end(io);
    ck_assert_msg(atomic_load(&hp_stopped),
                  "the ping-pong starved the worker's poll (%ld rounds)",
                  atomic_load(&hp_rounds));
    ck_assert(atomic_load(&hp_slept) && atomic_load(&hp_read));
    ck_assert_int_gt(atomic_load(&hp_rounds), 0);
    sp_chan_destroy(hp_ping);
    sp_chan_destroy(hp_pong);
    sp_chan_destroy(hp_started);
    close(hp_fds[0]);
    close(hp_fds[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sync_chan");
    SP_TEST_CASE(s, "sync_chan", 120, NULL, NULL, chan_fifo_per_sender,
                 chan_unbounded_never_blocks, chan_close_semantics, chan_recv_timeout,
                 select_fair_between_ready_channels, select_blocks_then_one_case,
                 select_stress_exactly_once, select_send_timeout_and_closed,
                 timed_waits_never_early, handoff_leaves_room_for_timers_and_fds);
    return sp_test_run(s);
}
