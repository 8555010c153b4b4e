/* The echo service (apps_common.h): the handler and its timeouts.
 *
 * A timer per wait (SO_RCVTIMEO under the hooks) would cost two timer-heap
 * operations on every message of a ping-pong client, half again the work
 * of the whole echo path. Instead each connection marks its progress in a
 * word (a coarse clock and "writing or not"), and one recurring timer per
 * service, the sweeper, runs while there are connections: it advances the
 * coarse clock and shuts down the connections whose mark is too old (their
 * read sees EOF, their write EPIPE, and the handler returns). The loop pays
 * a relaxed load and a store per step, no system call and no timer.
 *
 * Marks lag the true time by up to one period, so a connection is closed
 * only once its mark is a period older than the timeout: between the
 * timeout and the timeout plus two periods after its last progress, with a
 * period of a quarter of the shortest timeout. A connection is in the
 * table (by fd) from start to end, under `lock`, and the sweeper shuts fds
 * down under that lock too: it never touches an fd number after its handler
 * returned (the server closes the fd then, and the number may be reused). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spindle/tcp_server.h>
#include <spindle/timer.h>

#include "apps_common.h"

/* Small enough that an idle connection's fiber stays within a page or two;
 * bigger messages just take more rounds. */
enum { ECHO_CHUNK = 2048 };
#define MIN_PERIOD_MS 1

typedef struct echo_conn {
    int fd;
    _Atomic uint64_t mark; /* coarse ms << 1 | writing */
} echo_conn_t;

struct app_echo {
    sp_iomanager_t *io;
    _Atomic int64_t idle_ms, write_ms;
    _Atomic uint64_t now_ms; /* the coarse clock, set by the sweeper */
    pthread_mutex_t lock;    /* what follows */
    echo_conn_t **by_fd;     /* the connections (on their fibers' stacks) */
    int nfds, nconns;        /* by_fd's size; how many are in it */
    sp_timer_id_t sweeper;   /* 0 while there are no connections */
    uint64_t period_ms;
};

/* A quarter of the shortest timeout in force; 0 when there is none. */
static uint64_t period_ms(const app_echo_t *e)
{
    int64_t idle = atomic_load(&e->idle_ms), wr = atomic_load(&e->write_ms);
    int64_t t = idle && (!wr || idle < wr) ? idle : wr;
    if (!t)
        return 0;
    return t / 4 > MIN_PERIOD_MS ? (uint64_t)t / 4 : MIN_PERIOD_MS;
}

app_echo_t *app_echo_create(sp_iomanager_t *io, int64_t idle_ms, int64_t write_ms)
{
    app_echo_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->io = io;
    pthread_mutex_init(&e->lock, NULL);
    app_echo_set_timeouts(e, idle_ms, write_ms);
    return e;
}

void app_echo_set_timeouts(app_echo_t *e, int64_t idle_ms, int64_t write_ms)
{
    atomic_store(&e->idle_ms, idle_ms > 0 ? idle_ms : 0);
    atomic_store(&e->write_ms, write_ms > 0 ? write_ms : 0);
    /* A running sweeper takes the new period at once: a timeout cut from
     * a minute to a second must not wait for the old period. */
    pthread_mutex_lock(&e->lock);
    uint64_t p = period_ms(e);
    if (e->sweeper && p && p != e->period_ms &&
        sp_timer_reset(e->io, e->sweeper, p * 1000, true) == 0)
        e->period_ms = p;
    pthread_mutex_unlock(&e->lock);
}

void app_echo_destroy(app_echo_t *e)
{
    if (!e)
        return;
    pthread_mutex_destroy(&e->lock);
    free(e->by_fd);
    free(e);
}

static uint64_t clock_ms(void)
{
    return sp_now_ns() / 1000000;
}

static void mark(echo_conn_t *c, const app_echo_t *e, bool writing)
{
    uint64_t now = atomic_load_explicit(&e->now_ms, memory_order_relaxed);
    atomic_store_explicit(&c->mark, now << 1 | writing, memory_order_relaxed);
}

/* The recurring timer: advance the clock, shut down what is overdue. */
static void sweep(void *arg)
{
    app_echo_t *e = arg;
    uint64_t now = clock_ms();
    atomic_store(&e->now_ms, now);
    int64_t idle = atomic_load(&e->idle_ms), wr = atomic_load(&e->write_ms);
    pthread_mutex_lock(&e->lock);
    for (int fd = 0; fd < e->nfds; fd++) {
        echo_conn_t *c = e->by_fd[fd];
        if (!c)
            continue;
        uint64_t m = atomic_load_explicit(&c->mark, memory_order_relaxed);
        int64_t limit = m & 1 ? wr : idle;
        if (limit && now - (m >> 1) > (uint64_t)limit + e->period_ms)
            shutdown(fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&e->lock);
}

/* Room in by_fd for fd (the table grows to the highest fd seen). */
static bool make_room(app_echo_t *e, int fd)
{
    if (fd < e->nfds)
        return true;
    int n = fd < e->nfds * 2 ? e->nfds * 2 : fd + 64;
    echo_conn_t **t = realloc(e->by_fd, (size_t)n * sizeof *t);
    if (!t)
        return false;
    for (int i = e->nfds; i < n; i++)
        t[i] = NULL;
    e->by_fd = t;
    e->nfds = n;
    return true;
}

/* The first connection starts the sweeper. Its clock stood still while
 * there were none. */
static bool start_sweeper(app_echo_t *e)
{
    e->period_ms = period_ms(e);
    atomic_store(&e->now_ms, clock_ms());
    if (sp_timer_add(e->io, e->period_ms * 1000, sweep, e, SP_TIMER_RECURRING, NULL,
                     &e->sweeper) < 0)
        e->sweeper = 0;
    return e->sweeper != 0;
}

/* Put c in the table. False when there is no room or no timer: then the
 * connection runs without timeouts. */
static bool watch(app_echo_t *e, echo_conn_t *c)
{
    pthread_mutex_lock(&e->lock);
    bool ok = make_room(e, c->fd) && (e->nconns || start_sweeper(e));
    if (ok) {
        mark(c, e, false);
        e->by_fd[c->fd] = c;
        e->nconns++;
    }
    pthread_mutex_unlock(&e->lock);
    return ok;
}

/* Take c out (the last connection stops the sweeper). */
static void unwatch(app_echo_t *e, echo_conn_t *c)
{
    pthread_mutex_lock(&e->lock);
    e->by_fd[c->fd] = NULL;
    if (--e->nconns == 0) {
        sp_timer_cancel(e->io, e->sweeper);
        e->sweeper = 0;
    }
    pthread_mutex_unlock(&e->lock);
}

/* Read and write back until EOF or an error (a shutdown by the sweeper
 * among them); c NULL: no timeouts, nothing marked. */
static void echo_loop(int fd, app_echo_t *e, echo_conn_t *c)
{
    char buf[ECHO_CHUNK];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return; /* EOF (the client's shutdown or close) or an error */
        if (c)
            mark(c, e, true);
        if (sp_write_full(fd, buf, (size_t)n) < 0)
            return;
        if (c)
            mark(c, e, false);
    }
}

void app_echo(int fd, const sp_addr_t *peer, void *arg)
{
    (void)peer;
    app_echo_t *e = arg;
    echo_conn_t c = {.fd = fd};
    bool timed = e && period_ms(e) && watch(e, &c);
    echo_loop(fd, e, timed ? &c : NULL);
    if (timed)
        unwatch(e, &c);
}
