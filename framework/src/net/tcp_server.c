/* TCP server: acceptor fibers and one fiber per connection.
 *
 * The acceptors wait with sp_io_wait on non-blocking listening sockets, so
 * the server works in every flavour of the library; the handlers use plain
 * read/write, which the hooks make cooperative. `live` counts acceptors
 * and connection handlers; stop() waits for it to reach zero.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/list.h"
#include "io/fd_table.h"
#include "io/iomanager_internal.h"
#include "spindle/tcp_server.h"
#include "spindle/timer.h"

#define BACKOFF_MIN_US 1000
#define BACKOFF_MAX_US 1000000
/* The default connection limit leaves n/8 + FD_RESERVE of n fds. */
enum { FD_RESERVE = 64, MIN_DEFAULT_CONNS = 16 };

typedef struct conn {
    sp__link_t link; /* in the server's `conns` */
    sp_tcp_server_t *srv;
    int fd;
    int addr; /* the index of the address it came in on */
    sp_addr_t peer;
} conn_t;

typedef struct acceptor {
    sp_tcp_server_t *srv;
    int addr; /* index in srv->addrs */
    int fd;
    int stop_fd;  /* eventfd made readable by stop(): ends the acceptor's wait */
    int spare_fd; /* given up to shed a connection on EMFILE, or -1 */
} acceptor_t;

struct sp_tcp_server {
    sp_iomanager_t *io;
    sp_conn_fn fn;
    void *arg;
    sp_tcp_server_opts_t opts;
    int naddrs;
    sp_addr_t addrs[SP_TCP_SERVER_MAX_ADDRS];
    acceptor_t *acceptors;
    int nacceptors;
    _Atomic bool stopping;
    _Atomic uint64_t active; /* all addresses: the max_conns limit */
    struct {
        _Atomic uint64_t accepted, active, refused;
    } per[SP_TCP_SERVER_MAX_ADDRS]; /* by address: the stats */
    bool started;
    /* TCP_NODELAY is set on every TCP listener, and Linux hands it down to
     * the sockets accept(2) returns: no setsockopt per connection (a
     * system call each, costly on a kernel with PTI). False if a listener
     * refused it: then each connection sets it. */
    bool nodelay_inherited;
    pthread_mutex_t lock; /* conns, live, waiters */
    /* Held around every accept4 and shed: a spare fd given up to shed is
     * then never taken by another acceptor's accept. */
    pthread_mutex_t accept_lock;
    pthread_cond_t drained;
    sp__list_t conns;
    int live;
    sp__waiter_t *stop_waiter; /* a fiber in stop() */
};

int sp_tcp_default_max_conns(void)
{
    /* Kept well below INT_MAX: the HTTP server adds to it. */
    rlim_t n = INT_MAX / 4;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < n)
        n = rl.rlim_cur;
    long long conns = (long long)n - (long long)(n / 8) - FD_RESERVE;
    return conns < MIN_DEFAULT_CONNS ? MIN_DEFAULT_CONNS : (int)conns;
}

sp_tcp_server_t *sp_tcp_server_create(sp_iomanager_t *io, sp_conn_fn fn,
                                      void *arg,
                                      const sp_tcp_server_opts_t *opts)
{
    if (!io || !fn) {
        errno = EINVAL;
        return NULL;
    }
    sp_tcp_server_t *srv = calloc(1, sizeof *srv);
    if (!srv) {
        errno = ENOMEM;
        return NULL;
    }
    srv->io = io;
    srv->fn = fn;
    srv->arg = arg;
    if (opts)
        srv->opts = *opts;
    if (srv->opts.max_conns == 0)
        srv->opts.max_conns = sp_tcp_default_max_conns();
    else if (srv->opts.max_conns < 0)
        srv->opts.max_conns = INT_MAX; /* never reached */
    pthread_mutex_init(&srv->lock, NULL);
    pthread_mutex_init(&srv->accept_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines below */
    pthread_cond_init(&srv->drained, &ca);
    pthread_condattr_destroy(&ca);
    return srv;
}

int sp_tcp_server_listen(sp_tcp_server_t *srv, const sp_addr_t *addr)
{
    if (srv->started)
        return -EALREADY;
    if (srv->naddrs == SP_TCP_SERVER_MAX_ADDRS)
        return -ENOSPC;
    srv->addrs[srv->naddrs++] = *addr;
    return 0;
}

int sp_tcp_server_naddrs(const sp_tcp_server_t *srv)
{
    return srv->naddrs;
}

int sp_tcp_server_addr(const sp_tcp_server_t *srv, int i, sp_addr_t *out)
{
    if (i < 0 || i >= srv->naddrs)
        return -EINVAL;
    *out = srv->addrs[i];
    return 0;
}

int sp_tcp_server_stats(const sp_tcp_server_t *srv, sp_tcp_server_stats_t *out)
{
    *out = (sp_tcp_server_stats_t){.active = atomic_load(&srv->active)};
    for (int i = 0; i < srv->naddrs; i++) {
        out->accepted += atomic_load(&srv->per[i].accepted);
        out->refused += atomic_load(&srv->per[i].refused);
    }
    return 0;
}

int sp_tcp_server_addr_stats(const sp_tcp_server_t *srv, int i, sp_tcp_server_stats_t *out)
{
    if (i < 0 || i >= srv->naddrs)
        return -EINVAL;
    *out = (sp_tcp_server_stats_t){.accepted = atomic_load(&srv->per[i].accepted),
                                   .active = atomic_load(&srv->per[i].active),
                                   .refused = atomic_load(&srv->per[i].refused)};
    return 0;
}

/* ---- live count and waiting for it -------------------------------------- */

static void live_add(sp_tcp_server_t *srv)
{
    pthread_mutex_lock(&srv->lock);
    srv->live++;
    pthread_mutex_unlock(&srv->lock);
}

static void live_done(sp_tcp_server_t *srv)
{
    sp__waiter_t *w = NULL;
    pthread_mutex_lock(&srv->lock);
    if (--srv->live == 0) {
        pthread_cond_broadcast(&srv->drained);
        w = srv->stop_waiter;
        srv->stop_waiter = NULL;
        if (w)
            sp__waiter_promise(w, 0);
    }
    pthread_mutex_unlock(&srv->lock);
    if (w)
        sp__waiter_deliver(w, true);
}

static void on_drain_deadline(void *waiter)
{
    sp__waiter_promise(waiter, -ETIMEDOUT);
    sp__waiter_deliver(waiter, true);
}

/* Fiber side of wait_drained: park until live == 0 or the deadline. */
static int wait_drained_fiber(sp_tcp_server_t *srv, int64_t timeout_us)
{
    sp_iomanager_t *io = sp_iomanager_current();
    sp__waiter_t w;
    sp__waiter_init(&w);
    w.kind = SP__WAIT_DRAIN;
    pthread_mutex_lock(&srv->lock);
    if (srv->live == 0) {
        pthread_mutex_unlock(&srv->lock);
        return 0;
    }
    srv->stop_waiter = &w;
    pthread_mutex_unlock(&srv->lock);
    sp_timer_id_t tid = 0;
    if (timeout_us >= 0) {
        sp__worker_t *self = sp__sched_self(&io->s);
        if (sp__timer_add_inline(sp__iom_timer_heap(io, self->index),
                                 (uint64_t)timeout_us * 1000,
                                 on_drain_deadline, &w, &tid) < 0)
            tid = 0; /* no timer: wait without a deadline */
    }
    sp__waiter_wait(&w);
    if (tid)
        sp_timer_cancel(io, tid);
    pthread_mutex_lock(&srv->lock);
    if (srv->stop_waiter == &w)
        srv->stop_waiter = NULL;
    pthread_mutex_unlock(&srv->lock);
    return sp__waiter_settle(&w);
}

/* Wait until every acceptor and handler is done, or timeout_us (< 0:
 * forever). 0 or -ETIMEDOUT. */
static int wait_drained(sp_tcp_server_t *srv, int64_t timeout_us)
{
    if (sp_iomanager_current() && sp_fiber_current())
        return wait_drained_fiber(srv, timeout_us);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (timeout_us >= 0) {
        until.tv_sec += (time_t)(timeout_us / 1000000);
        until.tv_nsec += (long)(timeout_us % 1000000) * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    int rc = 0;
    pthread_mutex_lock(&srv->lock);
    while (srv->live > 0 && rc == 0)
        rc = timeout_us < 0 ? pthread_cond_wait(&srv->drained, &srv->lock)
                            : pthread_cond_timedwait(&srv->drained, &srv->lock, &until);
    int live = srv->live;
    pthread_mutex_unlock(&srv->lock);
    return live ? -ETIMEDOUT : 0;
}

/* ---- connections -------------------------------------------------------- */

static void unlink_conn(sp_tcp_server_t *srv, conn_t *c)
{
    pthread_mutex_lock(&srv->lock);
    sp__list_remove(&srv->conns, &c->link);
    pthread_mutex_unlock(&srv->lock);
}

static void conn_main(void *p)
{
    conn_t *c = p;
    sp_tcp_server_t *srv = c->srv;
    if (srv->opts.nodelay && !srv->nodelay_inherited)
        sp_set_nodelay(c->fd, true);
    srv->fn(c->fd, &c->peer, srv->arg);
    unlink_conn(srv, c);
    sp_io_close(c->fd); /* off the list first: stop() never sees a reused fd */
    atomic_fetch_sub(&srv->per[c->addr].active, 1);
    free(c);
    atomic_fetch_sub(&srv->active, 1);
    live_done(srv);
}

static int start_conn(sp_tcp_server_t *srv, int addr, int fd, const sp_addr_t *peer)
{
    conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->srv = srv;
    c->fd = fd;
    c->addr = addr;
    c->peer = *peer;
    /* Non-blocking underneath; the user sees a blocking socket, as
     * accept(2) would give. */
    sp__fd_adopt(fd, SP_FD_STREAM);
    pthread_mutex_lock(&srv->lock);
    srv->live++;
    sp__list_push_front(&srv->conns, &c->link);
    pthread_mutex_unlock(&srv->lock);
    atomic_fetch_add(&srv->active, 1);
    atomic_fetch_add(&srv->per[addr].active, 1);
    atomic_fetch_add(&srv->per[addr].accepted, 1);
    sp_scheduler_t *s = sp_iomanager_scheduler(srv->io);
    int rc;
    if (srv->opts.stack_size) {
        sp_fiber_t *f = sp_fiber_create(conn_main, c, srv->opts.stack_size, "conn");
        rc = f ? sp_schedule_fiber(s, f, SP_ANY_WORKER) : -errno;
        if (rc < 0)
            sp_fiber_destroy(f);
    } else {
        rc = sp_schedule(s, conn_main, c, SP_ANY_WORKER);
    }
    if (rc < 0) { /* undo: as if the handler returned at once */
        unlink_conn(srv, c);
        free(c);
        atomic_fetch_sub(&srv->active, 1);
        atomic_fetch_sub(&srv->per[addr].active, 1);
        atomic_fetch_sub(&srv->per[addr].accepted, 1);
        live_done(srv);
    }
    return rc;
}

/* ---- accepting ---------------------------------------------------------- */

static int open_spare(void)
{
    return open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Out of fds: give up this acceptor's spare fd to accept and close one
 * pending connection, so its client hears about it instead of hanging in
 * the backlog. A spare lost to a race is taken back first, as soon as any
 * fd is free again. True if a connection was shed. */
static bool shed_one(acceptor_t *a)
{
    pthread_mutex_lock(&a->srv->accept_lock);
    if (a->spare_fd < 0)
        a->spare_fd = open_spare();
    int c = -1;
    if (a->spare_fd >= 0) {
        close(a->spare_fd);
        c = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0) {
            atomic_fetch_add(&a->srv->per[a->addr].refused, 1);
            close(c);
        }
        a->spare_fd = open_spare();
    }
    pthread_mutex_unlock(&a->srv->accept_lock);
    return c >= 0;
}

static void acceptor_main(void *p)
{
    acceptor_t *a = p;
    sp_tcp_server_t *srv = a->srv;
    uint64_t backoff = 0;
    while (!atomic_load(&srv->stopping)) {
        sp_addr_t peer;
        peer.len = sizeof peer.ss;
        pthread_mutex_lock(&srv->accept_lock);
        if (a->spare_fd < 0) /* the spare comes before new connections */
            a->spare_fd = open_spare();
        int fd = accept4(a->fd, (struct sockaddr *)&peer.ss, &peer.len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        int err = errno;
        pthread_mutex_unlock(&srv->accept_lock);
        errno = err;
        if (fd >= 0) {
            backoff = 0;
            if (atomic_load(&srv->active) >= (uint64_t)srv->opts.max_conns ||
                start_conn(srv, a->addr, fd, &peer) < 0) {
                /* before the client sees it */
                atomic_fetch_add(&srv->per[a->addr].refused, 1);
                close(fd);
            }
            continue;
        }
        switch (errno) {
        case EAGAIN: {
            sp_io_want_t w[2] = {{a->fd, SP_IO_READ}, {a->stop_fd, SP_IO_READ}};
            if (sp_io_wait_any(w, 2, -1) == -EBADF)
                goto out;
            break;
        }
        case EMFILE:
        case ENFILE:
        case ENOBUFS:
        case ENOMEM:
            if (shed_one(a)) { /* progress: no need to wait */
                backoff = 0;
                break;
            }
            backoff = backoff ? backoff * 2 : BACKOFF_MIN_US;
            if (backoff > BACKOFF_MAX_US)
                backoff = BACKOFF_MAX_US;
            sp_sleep_us(backoff);
            break;
        case EINVAL:
        case EBADF:
            goto out;
        default: /* ECONNABORTED, EPROTO, EPERM...: that client only */
            break;
        }
    }
out:
    live_done(srv);
}

/* Listening sockets: per address, one per worker with SO_REUSEPORT (port 0
 * is resolved by the first bind and reused by the rest), else one. */
static int open_listeners(sp_tcp_server_t *srv)
{
    int per = srv->opts.no_reuseport ? 1 : sp_scheduler_threads(sp_iomanager_scheduler(srv->io));
    srv->acceptors = calloc((size_t)(srv->naddrs * per), sizeof *srv->acceptors);
    if (!srv->acceptors)
        return -ENOMEM;
    sp_listen_opts_t lo = {srv->opts.backlog, per > 1, true};
    srv->nodelay_inherited = srv->opts.nodelay;
    /* Unix paths have no SO_REUSEPORT: one socket each. */
    for (int i = 0; i < srv->naddrs; i++) {
        bool unix_path = sp_addr_family(&srv->addrs[i]) == AF_UNIX;
        int n = unix_path ? 1 : per;
        for (int k = 0; k < n; k++) {
            int fd = sp_listen(&srv->addrs[i], &lo);
            if (fd < 0)
                return fd;
            if (srv->opts.nodelay && !unix_path && sp_set_nodelay(fd, true) < 0)
                srv->nodelay_inherited = false;
            int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
            if (efd < 0) {
                int err = -errno;
                close(fd);
                return err;
            }
            srv->acceptors[srv->nacceptors++] = (acceptor_t){srv, i, fd, efd, open_spare()};
            if (k == 0)
                sp_addr_of_socket(fd, false, &srv->addrs[i]);
        }
    }
    return 0;
}

static void close_listeners(sp_tcp_server_t *srv)
{
    for (int i = 0; i < srv->nacceptors; i++) {
        sp_io_close(srv->acceptors[i].fd);
        sp_io_close(srv->acceptors[i].stop_fd);
        if (srv->acceptors[i].spare_fd >= 0)
            close(srv->acceptors[i].spare_fd);
    }
    srv->nacceptors = 0;
}

int sp_tcp_server_start(sp_tcp_server_t *srv)
{
    if (srv->started)
        return -EALREADY;
    if (!srv->naddrs)
        return -EDESTADDRREQ;
    int rc = open_listeners(srv);
    if (rc < 0) {
        close_listeners(srv);
        return rc;
    }
    sp_scheduler_t *s = sp_iomanager_scheduler(srv->io);
    int workers = sp_scheduler_threads(s);
    bool spread = !srv->opts.no_reuseport;
    for (int i = 0; i < srv->nacceptors; i++) {
        live_add(srv);
        rc = sp_schedule(s, acceptor_main, &srv->acceptors[i],
                         spread ? i % workers : SP_ANY_WORKER);
        if (rc < 0) {
            live_done(srv);
            return rc;
        }
    }
    srv->started = true;
    return 0;
}

int sp_tcp_server_stop(sp_tcp_server_t *srv, int64_t drain_us)
{
    if (!srv->started || atomic_exchange(&srv->stopping, true))
        return -EALREADY;
    /* Stop listening at once: a client connecting during the drain is
     * refused (and one still in the backlog reset) rather than left waiting
     * for an accept that never comes. shutdown(2), not close(2): the fds
     * stay open (their numbers not reusable) until the acceptors are gone.
     * Each acceptor also waits on its stop eventfd, which stays readable:
     * it wakes whether it is waiting now or about to. */
    for (int i = 0; i < srv->nacceptors; i++) {
        shutdown(srv->acceptors[i].fd, SHUT_RDWR);
        uint64_t one = 1;
        ssize_t w = write(srv->acceptors[i].stop_fd, &one, sizeof one);
        (void)w; /* cannot fail: the counter is far from overflow */
    }
    if (wait_drained(srv, drain_us) == -ETIMEDOUT) {
        pthread_mutex_lock(&srv->lock);
        for (sp__link_t *l = srv->conns.head; l; l = l->next)
            shutdown(sp__list_entry(l, conn_t, link)->fd, SHUT_RDWR); /* reads see EOF */
        pthread_mutex_unlock(&srv->lock);
        wait_drained(srv, -1);
    }
    close_listeners(srv);
    return 0;
}

void sp_tcp_server_destroy(sp_tcp_server_t *srv)
{
    if (!srv)
        return;
    close_listeners(srv);
    free(srv->acceptors);
    pthread_mutex_destroy(&srv->lock);
    pthread_mutex_destroy(&srv->accept_lock);
    pthread_cond_destroy(&srv->drained);
    free(srv);
}
