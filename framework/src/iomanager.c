/* IOManager: a scheduler whose idle workers block in their own libev loop.
 *
 * Ownership of an armed event (a "watch"): the watch belongs to one worker,
 * the owner, and only the owner's thread starts, stops or frees it, so no
 * libev loop is touched by two threads. Any thread may *detach* a watch
 * from its fd (cancel, delete, close, timeout) under the fd's lock; the
 * detacher then either settles it at once (it is the owner) or pushes it to
 * the owner's inbox and kicks the owner. A fiber waiting on a watch is woken
 * only by the owner, after the watch is stopped, so it resumes on the
 * owner's worker and never races the loop.
 *
 * Kicks use the same fence protocol as the scheduler's tickle: push, fence,
 * then write the pipe only if the owner is idle; an idle worker sets its
 * flag, fences, then drains its inbox before blocking.
 */
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd_table.h"
#include "hook_bridge.h"
#include "iomanager_internal.h"
#include "scheduler_internal.h"
#include "spindle/iomanager.h"
#include "timer_internal.h"

typedef struct sp_io_watch {
    ev_io io; /* first: libev hands this pointer to on_ready */
    struct sp_io_watch *next; /* inbox link */
    sp_fd_ctx_t *ctx;
    sp_iomanager_t *iom;
    int fd, dir, owner;
    uint32_t seq;
    sp_waiter_t *waiter; /* a fiber's wait, or NULL for a callback */
    sp_io_fn fn;
    void *arg;
    int result;
    bool detached; /* guarded by ctx->lock */
    bool fire;     /* detached to deliver: wake the fiber / run callback */
    bool queued;   /* in the owner's inbox; guarded by ctx->lock */
    bool started;  /* in the owner's loop; owner thread only */
} sp_io_watch_t;

typedef struct iom_worker {
    struct ev_loop *loop;
    int pipe_rd, pipe_wr;
    ev_io pipe_io;
    ev_timer wake_timer;
    _Atomic(sp_io_watch_t *) inbox;
    sp_timer_heap_t timers;
} iom_worker_t;

struct sp_iomanager {
    sp_scheduler_t s; /* first: an IOManager is a scheduler */
    iom_worker_t *w;
};

static void iom_idle(sp_scheduler_t *s, int worker);

static sp_iomanager_t *iom_of(sp_scheduler_t *s)
{
    return s && s->ops.idle == iom_idle ? (sp_iomanager_t *)s : NULL;
}

sp_iomanager_t *sp_iomanager_current(void)
{
    return iom_of(sp_scheduler_current());
}

sp_scheduler_t *sp_iomanager_scheduler(sp_iomanager_t *io)
{
    return &io->s;
}

sp_timer_heap_t *sp__iom_timer_heap(sp_iomanager_t *io, int worker)
{
    return &io->w[worker].timers;
}

static void tickle(sp_scheduler_t *s, int worker)
{
    char c = 1;
    /* Raw syscalls for our own pipe: no trip through the hooks. */
    long r = syscall(SYS_write, iom_of(s)->w[worker].pipe_wr, &c, 1);
    (void)r; /* a full pipe already guarantees a wake-up */
}

/* Wake the worker if it sleeps; a busy worker looks at its inbox and timers
 * before it next blocks. */
static void kick(sp_iomanager_t *io, int worker)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&io->s.workers[worker].idle))
        tickle(&io->s, worker);
}

void sp__iom_timer_kick(sp_iomanager_t *io, int worker)
{
    kick(io, worker);
}

/* ---- settling detached watches (owner thread) --------------------------- */

static void run_callback(void *p)
{
    sp_io_watch_t *w = p;
    w->fn(w->arg, w->result);
    free(w);
}

static void finish(sp_io_watch_t *w)
{
    sp_iomanager_t *io = w->iom;
    if (w->started) {
        ev_io_stop(io->w[w->owner].loop, &w->io);
        w->started = false;
    }
    if (w->waiter) {
        if (w->fire)
            sp__waiter_deliver(w->waiter, true);
        free(w);
        return;
    }
    if (w->fire) {
        if (sp_schedule(&io->s, run_callback, w, SP_ANY_WORKER) != 0)
            abort(); /* our hold keeps the scheduler running */
    } else {
        free(w);
    }
    sp__sched_release(&io->s); /* the callback event's hold */
}

static bool on_owner(const sp_io_watch_t *w)
{
    sp_worker_t *self = sp__sched_self(&w->iom->s);
    return self && self->index == w->owner;
}

static void inbox_push(sp_io_watch_t *w)
{
    _Atomic(sp_io_watch_t *) *inbox = &w->iom->w[w->owner].inbox;
    w->queued = true;
    w->next = atomic_load(inbox);
    while (!atomic_compare_exchange_weak(inbox, &w->next, w))
        ;
}

/* How a watch leaves its fd. */
typedef enum detach_mode {
    FIRE,    /* ready, cancelled, timed out, closed: wake / run callback */
    DROP,    /* deleted: a fiber is not woken, a callback never runs */
    WITHDRAW /* the waiting fiber itself takes back a watch that did not fire */
} detach_mode_t;

/* Detach the fd's current watch of direction dir (ctx lock held). Returns
 * the watch if the caller must finish() it after unlocking. */
static sp_io_watch_t *detach(sp_fd_ctx_t *ctx, int dir, int result,
                             detach_mode_t mode, bool *kick_owner)
{
    sp_io_watch_t *w = ctx->watch[dir];
    ctx->watch[dir] = NULL;
    w->detached = true;
    w->fire = mode == FIRE;
    w->result = result;
    if (w->waiter && mode == FIRE)
        sp__waiter_promise(w->waiter, result);
    if (w->waiter && mode == DROP) { /* ends the wait, without a wake-up */
        sp__waiter_promise(w->waiter, result);
        sp__waiter_deliver(w->waiter, false);
    }
    if (w->queued)
        return NULL; /* the owner's inbox handles it */
    if (on_owner(w))
        return w;
    inbox_push(w);
    *kick_owner = true;
    return NULL;
}

static void drain_inbox(iom_worker_t *x)
{
    sp_io_watch_t *list = atomic_exchange(&x->inbox, NULL), *fifo = NULL;
    while (list) { /* the inbox is a stack: reverse into arrival order */
        sp_io_watch_t *next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
    }
    while (fifo) {
        sp_io_watch_t *w = fifo;
        fifo = w->next;
        pthread_mutex_lock(&w->ctx->lock);
        w->queued = false;
        bool detached = w->detached;
        pthread_mutex_unlock(&w->ctx->lock);
        if (detached) {
            finish(w);
        } else if (!w->started) {
            ev_io_start(x->loop, &w->io);
            w->started = true;
        }
    }
}

static void on_ready(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)revents;
    sp_io_watch_t *w = (sp_io_watch_t *)io;
    bool kick_owner = false;
    sp_io_watch_t *mine = NULL;
    pthread_mutex_lock(&w->ctx->lock);
    if (!w->detached)
        mine = detach(w->ctx, w->dir, 0, FIRE, &kick_owner);
    pthread_mutex_unlock(&w->ctx->lock);
    if (mine) {
        finish(mine);
    } else { /* detached elsewhere: stop firing; the inbox finishes it */
        ev_io_stop(loop, io);
        w->started = false;
    }
}

/* ---- workers ------------------------------------------------------------ */

static void on_pipe(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    (void)revents;
    char buf[64];
    while (syscall(SYS_read, io->fd, buf, sizeof buf) > 0)
        ;
}

static void on_wake_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)t;
    (void)revents; /* only ends ev_run; timers are expired after it */
}

static void poll_once(sp_scheduler_t *s, int worker, bool block)
{
    iom_worker_t *x = &iom_of(s)->w[worker];
    drain_inbox(x);
    int64_t next = sp__timer_heap_next(&x->timers);
    if (block && next != 0) {
        if (next > 0) {
            /* Round up to whole microseconds: never wake before the
             * deadline (early wake-ups just re-arm). */
            ev_now_update(x->loop);
            ev_timer_set(&x->wake_timer, (double)(next + 999) / 1e9, 0.);
            ev_timer_start(x->loop, &x->wake_timer);
        }
        ev_run(x->loop, EVRUN_ONCE);
        ev_timer_stop(x->loop, &x->wake_timer);
    } else {
        ev_run(x->loop, EVRUN_NOWAIT);
    }
    drain_inbox(x);
    sp__timer_heap_expire(&x->timers);
}

static void iom_idle(sp_scheduler_t *s, int worker)
{
    poll_once(s, worker, true);
}

static void iom_tick(sp_scheduler_t *s, int worker)
{
    poll_once(s, worker, false);
}

static int worker_init(iom_worker_t *x, sp_scheduler_t *s, int index)
{
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    x->pipe_rd = p[0];
    x->pipe_wr = p[1];
    x->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    if (!x->loop)
        x->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOENV);
    if (!x->loop)
        return -ENOMEM;
    ev_io_init(&x->pipe_io, on_pipe, x->pipe_rd, EV_READ);
    ev_io_start(x->loop, &x->pipe_io);
    ev_init(&x->wake_timer, on_wake_timer);
    atomic_init(&x->inbox, NULL);
    return sp__timer_heap_init(&x->timers, s, index);
}

static void worker_fini(iom_worker_t *x)
{
    if (x->loop)
        ev_loop_destroy(x->loop);
    if (x->pipe_rd > 0) {
        close(x->pipe_rd);
        close(x->pipe_wr);
    }
    sp__timer_heap_fini(&x->timers);
}

sp_iomanager_t *sp_iomanager_create(const char *name, int threads,
                                    bool use_caller)
{
    sp_iomanager_t *io = calloc(1, sizeof *io);
    if (!io) {
        errno = ENOMEM;
        return NULL;
    }
    int rc = sp__sched_init(&io->s, name ? name : "iomanager", threads,
                            use_caller);
    if (rc < 0) {
        free(io);
        errno = -rc;
        return NULL;
    }
    io->s.ops.idle = iom_idle;
    io->s.ops.tickle = tickle;
    io->s.ops.tick = iom_tick;
    io->s.has_io = true;
    sp__hook_connect();
    io->w = calloc((size_t)threads, sizeof *io->w);
    rc = io->w ? 0 : -ENOMEM;
    for (int i = 0; i < threads && rc == 0; i++)
        rc = worker_init(&io->w[i], &io->s, i);
    if (rc < 0) {
        sp_iomanager_destroy(io);
        errno = -rc;
        return NULL;
    }
    return io;
}

int sp_iomanager_start(sp_iomanager_t *io)
{
    return sp_scheduler_start(&io->s);
}

int sp_iomanager_stop(sp_iomanager_t *io)
{
    return sp_scheduler_stop(&io->s);
}

void sp_iomanager_destroy(sp_iomanager_t *io)
{
    if (!io)
        return;
    for (int i = 0; io->w && i < io->s.nworkers; i++)
        worker_fini(&io->w[i]);
    free(io->w);
    sp__sched_fini(&io->s);
    free(io);
}

/* ---- events ------------------------------------------------------------- */

static int dir_of(int event)
{
    return event == SP_IO_READ ? 0 : event == SP_IO_WRITE ? 1 : -1;
}

static sp_io_watch_t *new_watch(sp_iomanager_t *io, int fd, int dir)
{
    sp_io_watch_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    ev_io_init(&w->io, on_ready, fd, dir ? EV_WRITE : EV_READ);
    w->iom = io;
    w->fd = fd;
    w->dir = dir;
    return w;
}

/* Make w the fd's armed watch of its direction (ctx lock held). */
static int attach(sp_fd_ctx_t *ctx, sp_io_watch_t *w)
{
    if (ctx->watch[w->dir])
        return -EEXIST;
    w->ctx = ctx;
    w->seq = ++ctx->wait_seq[w->dir];
    ctx->watch[w->dir] = w;
    return 0;
}

static void on_wait_timeout(void *waiter)
{
    sp__waiter_promise(waiter, -ETIMEDOUT);
    sp__waiter_deliver(waiter, true);
}

/* Where one armed watch of a wait sits, to take it back without touching
 * the watch itself (it may be freed once it fired). */
typedef struct armed {
    sp_fd_ctx_t *ctx;
    int dir;
    uint32_t seq;
} armed_t;

static void withdraw(const armed_t *a, int n)
{
    for (int i = 0; i < n; i++) {
        bool kick_owner = false; /* the owner is this thread */
        sp_io_watch_t *w = NULL;
        pthread_mutex_lock(&a[i].ctx->lock);
        sp_io_watch_t *cur = a[i].ctx->watch[a[i].dir];
        if (cur && cur->seq == a[i].seq)
            w = detach(a[i].ctx, a[i].dir, 0, WITHDRAW, &kick_owner);
        pthread_mutex_unlock(&a[i].ctx->lock);
        if (w)
            finish(w);
    }
}

/* Arm one watch per (fd, direction) for the waiter on the calling worker's
 * loop. Returns how many were armed, or a negative errno (then none is). */
static int arm(sp_iomanager_t *io, int owner, const sp_io_want_t *wants,
               int n, sp_waiter_t *waiter, armed_t *out)
{
    int k = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        for (int dir = 0; dir < 2 && rc == 0; dir++) {
            if (!(wants[i].events & (dir ? SP_IO_WRITE : SP_IO_READ)))
                continue;
            sp_fd_ctx_t *ctx = sp__fd_ctx(wants[i].fd);
            sp_io_watch_t *w = ctx ? new_watch(io, wants[i].fd, dir) : NULL;
            if (!w) {
                rc = ctx ? -ENOMEM : -EBADF;
                break;
            }
            w->waiter = waiter;
            w->owner = owner;
            pthread_mutex_lock(&ctx->lock);
            rc = attach(ctx, w);
            out[k] = (armed_t){ctx, dir, w->seq};
            pthread_mutex_unlock(&ctx->lock);
            if (rc < 0) {
                free(w);
                break;
            }
            ev_io_start(io->w[owner].loop, &w->io);
            w->started = true;
            k++;
        }
    }
    if (rc < 0) {
        withdraw(out, k);
        return rc;
    }
    return k;
}

int sp_io_wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us)
{
    sp_iomanager_t *io = sp_iomanager_current();
    if (!io || !sp_fiber_current())
        return -EPERM;
    if (n < 0 || n > SP_IO_WAIT_MAX)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (!wants[i].events || (wants[i].events & ~(SP_IO_READ | SP_IO_WRITE)))
            return -EINVAL;
    int owner = sp__sched_self(&io->s)->index;
    sp_waiter_t waiter;
    sp__waiter_init(&waiter);
    armed_t armed[2 * SP_IO_WAIT_MAX];
    int k = arm(io, owner, wants, n, &waiter, armed);
    if (k < 0)
        return k;
    sp_timer_id_t tid = 0;
    if (timeout_us >= 0) {
        int rc = sp__timer_add_inline(&io->w[owner].timers,
                                      (uint64_t)timeout_us * 1000,
                                      on_wait_timeout, &waiter, &tid);
        if (rc < 0) {
            withdraw(armed, k);
            sp__waiter_settle(&waiter);
            return rc;
        }
    }
    int rc = sp__waiter_wait(&waiter);
    /* The timer is on this thread, like its inline callback: once cancel
     * says it already fired, that callback has completed. */
    if (tid)
        sp_timer_cancel(io, tid);
    withdraw(armed, k);
    sp__waiter_settle(&waiter);
    return rc;
}

int sp_io_wait(int fd, int event, int64_t timeout_us)
{
    if (event != SP_IO_READ && event != SP_IO_WRITE)
        return -EINVAL;
    sp_io_want_t want = {fd, event};
    return sp_io_wait_any(&want, 1, timeout_us);
}

int sp_io_add(sp_iomanager_t *io, int fd, int event, sp_io_fn fn, void *arg)
{
    int dir = dir_of(event);
    sp_fd_ctx_t *ctx = sp__fd_ctx(fd);
    if (!io || !fn || dir < 0 || !ctx)
        return -EINVAL;
    int rc = sp__sched_hold(&io->s);
    if (rc < 0)
        return rc;
    sp_io_watch_t *w = new_watch(io, fd, dir);
    if (!w) {
        sp__sched_release(&io->s);
        return -ENOMEM;
    }
    w->fn = fn;
    w->arg = arg;
    sp_worker_t *self = sp__sched_self(&io->s);
    w->owner = self ? self->index
                    : (int)(atomic_fetch_add(&io->s.rr, 1) %
                            (unsigned)io->s.nworkers);
    pthread_mutex_lock(&ctx->lock);
    rc = attach(ctx, w);
    if (rc == 0 && !self)
        inbox_push(w); /* the owner starts it */
    pthread_mutex_unlock(&ctx->lock);
    if (rc < 0) {
        free(w);
        sp__sched_release(&io->s);
        return rc;
    }
    if (self) {
        ev_io_start(io->w[w->owner].loop, &w->io);
        w->started = true;
    } else {
        kick(io, w->owner);
    }
    return 0;
}

/* Detach and settle the armed events of fd selected by `dirs` (bit 0 READ,
 * bit 1 WRITE). Returns how many were armed. */
static int end_events(int fd, unsigned dirs, int result, detach_mode_t mode,
                      bool forget)
{
    sp_fd_ctx_t *ctx = sp__fd_ctx(fd);
    if (!ctx)
        return 0;
    sp_io_watch_t *now[2] = {NULL, NULL};
    bool kicks[2] = {false, false};
    int owners[2] = {0, 0}, n = 0;
    sp_iomanager_t *ios[2] = {NULL, NULL};
    pthread_mutex_lock(&ctx->lock);
    for (int dir = 0; dir < 2; dir++) {
        sp_io_watch_t *w = ctx->watch[dir];
        if (!(dirs & (1u << dir)) || !w)
            continue;
        n++;
        ios[dir] = w->iom;
        owners[dir] = w->owner;
        now[dir] = detach(ctx, dir, result, mode, &kicks[dir]);
    }
    if (forget)
        sp__fd_ctx_forget(ctx);
    pthread_mutex_unlock(&ctx->lock);
    for (int dir = 0; dir < 2; dir++) {
        if (now[dir])
            finish(now[dir]);
        if (kicks[dir])
            kick(ios[dir], owners[dir]);
    }
    return n;
}

int sp_io_del(int fd, int event)
{
    int dir = dir_of(event);
    if (dir < 0)
        return -EINVAL;
    return end_events(fd, 1u << dir, -EINTR, DROP, false) ? 0 : -ENOENT;
}

int sp_io_cancel(int fd, int event)
{
    int dir = dir_of(event);
    if (dir < 0)
        return -EINVAL;
    return end_events(fd, 1u << dir, -ECANCELED, FIRE, false) ? 0 : -ENOENT;
}

int sp_io_cancel_all(int fd)
{
    return end_events(fd, 3, -ECANCELED, FIRE, false);
}

int sp_io_close_fd(int fd)
{
    return end_events(fd, 3, -EBADF, FIRE, true);
}
