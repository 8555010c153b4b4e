/* fd events: the waits and callbacks armed on fds.
 *
 * A watch is a libev ev_io for one fd and direction, kept in the fd's
 * context. It belongs to one worker, its owner: only the owner's thread
 * starts, stops or frees it, so no loop is touched by two threads. A watch
 * is "armed" while a fiber's waiter or a callback is attached, "idle"
 * otherwise. A watch stays started after it fires, so a fiber that reads,
 * answers and waits again on the same fd costs no epoll_ctl; an idle watch
 * that fires is stopped then (level-triggered epoll would fire it again),
 * and started again by the next wait.
 *
 * Any thread may take the waiter or callback off a watch (ready, cancel,
 * delete, close) under the fd's lock and deliver it after unlocking: a
 * waiting fiber is woken (it resumes on the worker it runs on; fibers do
 * not migrate), a callback is scheduled as a task. Requests for the owner
 * (start a watch armed from another thread; free a watch whose fd closed or
 * moved to another worker) go through the owner's inbox.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fd_table.h"
#include "iomanager_internal.h"

/* A fiber's wait on fds. `unarmed` counts the watches that took the waiter
 * off themselves (under their fd's lock): when all did, the waiting fiber
 * has nothing to withdraw. */
typedef struct io_waiter {
    sp_waiter_t base;
    _Atomic int unarmed;
} io_waiter_t;

/* Fields in the order a wait and its wake-up touch them: two cache lines
 * (the watch is allocated on a line boundary). The first is all on_ready
 * reads: libev's part (which it has just read), the fd's context and the
 * prefetch hints; it asks for the second, which ready_one reads under the
 * fd's lock. */
typedef struct sp_io_watch {
    ev_io io; /* first: libev hands this pointer to on_ready; io.data is
                 the fd's context (set once), read with ctx_of() */
    /* The armed fiber and its parked frames, for on_ready to prefetch;
     * read racily (stale costs a prefetch). */
    _Atomic uintptr_t hint_fiber, hint_frames;
    /* Guarded by the fd's lock, except as noted. */
    io_waiter_t *waiter;  /* armed by a fiber, or */
    struct io_call *call; /* armed with a callback, or neither: idle */
    sp_iomanager_t *iom; /* (set once) */
    int dir, owner;      /* (set once) */
    uint32_t seq;  /* numbers each arming */
    bool queued;   /* in the owner's inbox */
    bool retired;  /* no longer its fd's watch: the owner frees it */
    bool closing;  /* retired because its fd is being closed */
    bool started;  /* owner thread only */
    struct close_ack *ack; /* a closer waiting for the owner to drop it */
    struct sp_io_watch *next; /* inbox link */
    struct sp_io_watch *all_prev, *all_next; /* io->watches, under its lock */
} sp_io_watch_t;

static sp_fd_ctx_t *ctx_of(const sp_io_watch_t *w)
{
    return w->io.data;
}

/* How far below its waiter (in the wait's frame: sp__io_wait_fd for the
 * hooks) a parked fiber's saved stack pointer sits: about 250 bytes of
 * park-path frames with gcc -O2 on x86-64. A guess that is off costs a
 * line or two of the prefetch, nothing else. */
#define PARK_DEPTH 256

/* A callback event, allocated when it is armed (sp_io_add), so that
 * delivering it needs no memory; the task that runs it frees it. */
typedef struct io_call {
    sp_io_fn fn;
    void *arg;
    int result;
} io_call_t;

/* What was taken off a watch, to deliver once the lock is released. */
typedef struct taken {
    sp_iomanager_t *io;
    sp_waiter_t *waiter;
    io_call_t *call;
    int result;
    bool drop; /* deleted: no wake-up, no callback */
} taken_t;

static bool on_owner(const sp_io_watch_t *w)
{
    sp_worker_t *self = sp__sched_self(&w->iom->s);
    return self && self->index == w->owner;
}

static struct ev_loop *loop_of(const sp_io_watch_t *w)
{
    return w->iom->w[w->owner]->loop;
}

/* ctx lock held. Leave w for its owner; false if the owner's worker has
 * ended (its loop is dead: the caller may act on w itself). */
static bool inbox_push(sp_io_watch_t *w)
{
    iom_worker_t *x = w->iom->w[w->owner];
    pthread_mutex_lock(&x->inbox_lock);
    bool open = !x->gone;
    if (open) {
        w->queued = true;
        w->next = atomic_load(&x->inbox);
        while (!atomic_compare_exchange_weak(&x->inbox, &w->next, w))
            ;
    }
    pthread_mutex_unlock(&x->inbox_lock);
    return open;
}

/* A close waits until every owner has stopped its watch on the fd, so no
 * loop touches the fd number after close(2) gave it back (a fiber parks;
 * a plain thread sleeps on a condition variable). */
typedef struct close_ack {
    _Atomic int pending;
    sp_waiter_t *waiter;
    pthread_mutex_t lock;
    pthread_cond_t done;
} close_ack_t;

static void ack_one(close_ack_t *a)
{
    if (a->waiter) {
        if (atomic_fetch_sub(&a->pending, 1) == 1) {
            sp__waiter_promise(a->waiter, 0);
            sp__waiter_deliver(a->waiter, true);
        }
        return;
    }
    pthread_mutex_lock(&a->lock);
    if (atomic_fetch_sub(&a->pending, 1) == 1)
        pthread_cond_signal(&a->done);
    pthread_mutex_unlock(&a->lock);
}

static void ack_wait(close_ack_t *a)
{
    if (a->waiter) {
        sp__waiter_wait(a->waiter);
        sp__waiter_settle(a->waiter);
        return;
    }
    pthread_mutex_lock(&a->lock);
    while (atomic_load(&a->pending))
        pthread_cond_wait(&a->done, &a->lock);
    pthread_mutex_unlock(&a->lock);
}

/* Lock held. Take the waiter or callback off w; false if w is idle. */
static bool take(sp_io_watch_t *w, int result, bool drop, taken_t *out)
{
    if (!w->waiter && !w->call)
        return false;
    sp_waiter_t *waiter = w->waiter ? &w->waiter->base : NULL;
    *out = (taken_t){w->iom, waiter, w->call, result, drop};
    if (waiter) {
        sp__waiter_promise(waiter, result);
        if (waiter->sole) /* its only watch: no locked add */
            atomic_store_explicit(&w->waiter->unarmed, 1, memory_order_relaxed);
        else
            atomic_fetch_add_explicit(&w->waiter->unarmed, 1, memory_order_relaxed);
        if (drop) /* ends the wait, without a wake-up */
            sp__waiter_deliver(waiter, false);
    }
    w->waiter = NULL;
    w->call = NULL;
    return true;
}

static void run_callback(void *p)
{
    io_call_t c = *(io_call_t *)p;
    free(p);
    c.fn(c.arg, c.result);
}

static void deliver(const taken_t *t)
{
    if (t->waiter) {
        if (!t->drop)
            sp__waiter_deliver(t->waiter, true);
        return;
    }
    if (t->drop) {
        free(t->call);
    } else {
        t->call->result = t->result;
        /* Holding the event's reference, the scheduler cannot stop. */
        if (sp_schedule(&t->io->s, run_callback, t->call, SP_ANY_WORKER) != 0)
            abort(); /* out of memory for the task */
    }
    sp__sched_release(&t->io->s); /* the callback event's hold */
}

/* Lock held: w leaves its fd. Returns w if the caller, being the owner,
 * must destroy it after unlocking; otherwise the owner's inbox has it. */
static sp_io_watch_t *retire(sp_io_watch_t *w, bool *kick_owner)
{
    ctx_of(w)->watch[w->dir] = NULL;
    w->retired = true;
    if (w->queued)
        return NULL;
    if (on_owner(w) || !inbox_push(w))
        return w;
    *kick_owner = true;
    return NULL;
}

static void track(sp_io_watch_t *w)
{
    iom_worker_t *x = w->iom->w[w->owner];
    pthread_mutex_lock(&x->watches_lock);
    w->all_next = x->watches;
    if (x->watches)
        x->watches->all_prev = w;
    x->watches = w;
    pthread_mutex_unlock(&x->watches_lock);
}

static void untrack(sp_io_watch_t *w)
{
    iom_worker_t *x = w->iom->w[w->owner];
    pthread_mutex_lock(&x->watches_lock);
    if (w->all_prev)
        w->all_prev->all_next = w->all_next;
    else
        x->watches = w->all_next;
    if (w->all_next)
        w->all_next->all_prev = w->all_prev;
    pthread_mutex_unlock(&x->watches_lock);
}

/* Owner thread. When the fd is being closed, let the loop look once more
 * before the closer goes on: libev drops an fd from its epoll set lazily,
 * at the fd's next event, and that must happen before close(2) can give
 * the number to a new file. Never called from inside ev_run: no code that
 * frees a watch runs in the loop's callbacks, so a ready batch never holds
 * a freed watch. */
static void destroy(sp_io_watch_t *w, close_ack_t *ack, bool closing)
{
    struct ev_loop *loop = loop_of(w);
    if (w->started)
        ev_io_stop(loop, &w->io);
    if (closing)
        ev_run(loop, EVRUN_NOWAIT);
    untrack(w);
    free(w);
    if (ack)
        ack_one(ack);
}

void sp__io_forget_all(sp_iomanager_t *io)
{
    for (int i = 0; i < io->nw; i++) {
        sp_io_watch_t *w = io->w[i]->watches;
        while (w) {
            sp_io_watch_t *next = w->all_next;
            sp__spin_lock(&ctx_of(w)->lock);
            if (ctx_of(w)->watch[w->dir] == w)
                ctx_of(w)->watch[w->dir] = NULL;
            sp__spin_unlock(&ctx_of(w)->lock);
            free(w);
            w = next;
        }
        io->w[i]->watches = NULL;
    }
}

/* Keep a fiber woken by the poll to run once ev_run returns; false if out
 * of memory. */
static bool due_push(iom_worker_t *x, struct sp_fiber *f)
{
    return sp__fibers_push(&x->due, &x->ndue, &x->capdue, f);
}

void sp__io_run_due(sp_iomanager_t *io, int worker)
{
    iom_worker_t *x = io->w[worker];
    sp_worker_t *self = &io->s.workers[worker];
    /* Nothing adds to the list meanwhile: a running fiber's wake-ups go
     * through the queues (the worker is not polling then). */
    while (x->ndue) {
        unsigned k = --x->ndue;
        /* The next two fibers' lines, while this one runs: on_ready asked
         * for them too, but a long batch runs long after that (their
         * frames are asked for by the switch, once the line is there). */
        if (k > 0)
            sp__prefetch_lines(x->due[k - 1], x->due[k > 1 ? k - 2 : k - 1]);
        sp__sched_run_now(self, x->due[k]);
    }
}

/* On the owner's thread, for one watch found ready. When its worker polls
 * (not from inside a task), a waiting fiber of this worker is claimed right
 * here and runs as soon as the loop returns (sp__io_run_due), as a callback
 * server's handlers run, with no trip through a locked queue. */
static void ready_one(struct ev_loop *loop, sp_io_watch_t *w)
{
    sp_worker_t *self = &w->iom->s.workers[w->owner];
    sp_fd_ctx_t *ctx = ctx_of(w);
    taken_t t;
    sp__spin_lock(&ctx->lock);
    bool got = !w->retired && take(w, 0, false, &t);
    sp__spin_unlock(&ctx->lock);
    if (got) {
        if (t.waiter && sp__sched_polling(self)) {
            struct sp_fiber *f = sp__waiter_deliver_here(t.waiter);
            if (f && !due_push(w->iom->w[w->owner], f))
                abort(); /* out of memory while holding a live fiber */
        } else {
            deliver(&t);
        }
        return;
    }
    /* Nobody waits (or the watch is on its way out): stop it until the next
     * wait, or level-triggered epoll reports the fd again and again. */
    ev_io_stop(loop, &w->io);
    w->started = false;
}

static void ready_flush(struct ev_loop *loop, iom_worker_t *x)
{
    for (unsigned i = 0; i < x->nbatch; i++)
        ready_one(loop, x->batch[i]);
    x->nbatch = 0;
}

/* libev's callback for every watch: it notes the watch in the batch and
 * asks for the lines handling it will touch (the fd's lock, the watch's
 * second line, the waiting fiber and its frames). With many connections
 * each is likely cold; asked for across the batch, they arrive together
 * instead of one dependent miss after another for each event (see
 * `AB_BIN=... bench/peers.sh echo 1000`). */
static void on_ready(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)revents;
    sp_io_watch_t *w = (sp_io_watch_t *)io;
    iom_worker_t *x = ev_userdata(loop);
    sp__prefetch_lines(ctx_of(w), &w->waiter);
    uintptr_t fiber =
        atomic_load_explicit(&w->hint_fiber, memory_order_relaxed);
    if (fiber)
        sp__ctx_prefetch((const void *)fiber,
                         (const void *)atomic_load_explicit(
                             &w->hint_frames, memory_order_relaxed));
    if (x->nbatch == READY_BATCH)
        ready_flush(loop, x);
    x->batch[x->nbatch++] = w;
}

void sp__io_invoke_pending(struct ev_loop *loop)
{
    ev_invoke_pending(loop);
    ready_flush(loop, ev_userdata(loop));
}

void sp__io_worker_gone(sp_iomanager_t *io, int worker)
{
    iom_worker_t *x = io->w[worker];
    pthread_mutex_lock(&x->inbox_lock);
    x->gone = true;
    pthread_mutex_unlock(&x->inbox_lock);
    sp__io_drain_inbox(io, worker);
}

/* Once an extra worker has left, a thread that retires one of its watches
 * finds the inbox closed and would stop the watch on that worker's loop
 * itself, racing a later thread of the same slot; so the worker takes its
 * idle watches off their fds first (the next wait makes a new one). Only
 * this thread adds or frees an extra worker's watches while it runs (they
 * are armed from its own fibers; others free them only once its inbox is
 * closed), so the list is walked without its lock: taking it outside the
 * fd locks would invert the order arm() uses. */
bool sp__io_drop_idle(sp_iomanager_t *io, int worker)
{
    sp_io_watch_t *drop = NULL;
    bool armed = false;
    for (sp_io_watch_t *w = io->w[worker]->watches; w; w = w->all_next) {
        bool kick = false; /* stays false: retired by its owner */
        sp__spin_lock(&ctx_of(w)->lock);
        if (w->waiter || w->call || (w->queued && !w->retired)) {
            armed = true;
        } else if (!w->retired && retire(w, &kick)) {
            w->next = drop;
            drop = w;
        }
        sp__spin_unlock(&ctx_of(w)->lock);
    }
    while (drop) {
        sp_io_watch_t *next = drop->next;
        destroy(drop, NULL, false);
        drop = next;
    }
    return !armed;
}

bool sp__io_drain_inbox(sp_iomanager_t *io, int worker)
{
    bool looked = false;
    iom_worker_t *x = io->w[worker];
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
        sp__spin_lock(&ctx_of(w)->lock);
        w->queued = false;
        bool retired = w->retired, armed = w->waiter || w->call;
        bool closing = w->closing;
        close_ack_t *ack = w->ack;
        sp__spin_unlock(&ctx_of(w)->lock);
        if (retired) {
            destroy(w, ack, closing);
            looked |= closing;
        } else if (armed && !w->started) {
            ev_io_start(x->loop, &w->io);
            w->started = true;
        }
    }
    return looked;
}

/* Arm the fd's watch of direction dir for a waiter or a callback, on
 * worker `owner` (`mine`: the calling thread's). On success *seq numbers
 * this arming. */
static int arm(sp_iomanager_t *io, int owner, bool mine, sp_fd_ctx_t *ctx,
               int fd, int dir, io_waiter_t *waiter, io_call_t *call,
               uint32_t *seq)
{
    sp_io_watch_t *old = NULL;
    bool kick_old = false, kick_owner = false;
    int old_owner = 0;
    sp__spin_lock(&ctx->lock);
    sp_io_watch_t *w = ctx->watch[dir];
    if (w && (w->waiter || w->call)) {
        sp__spin_unlock(&ctx->lock);
        return -EEXIST;
    }
    if (w && (w->owner != owner || w->iom != io)) { /* moved elsewhere */
        old_owner = w->owner;
        old = retire(w, &kick_old);
        w = NULL;
    }
    if (!w) {
        w = aligned_alloc(64, (sizeof *w + 63) & ~(size_t)63);
        if (w)
            memset(w, 0, sizeof *w);
        if (!w) {
            sp__spin_unlock(&ctx->lock);
            return -ENOMEM;
        }
        ev_io_init(&w->io, on_ready, fd, dir ? EV_WRITE : EV_READ);
        w->io.data = ctx;
        w->iom = io;
        w->dir = dir;
        w->owner = owner;
        ctx->watch[dir] = w;
        track(w);
    }
    w->waiter = waiter;
    w->call = call;
    w->seq = *seq = ++ctx->wait_seq[dir];
    /* on_ready's prefetch hints; none for a callback. */
    uintptr_t fiber = waiter ? (uintptr_t)waiter->base.fiber : 0;
    if (fiber) {
        atomic_store_explicit(&w->hint_frames, (uintptr_t)waiter - PARK_DEPTH,
                              memory_order_relaxed);
        waiter->base.fiber->last_watch = w;
    }
    atomic_store_explicit(&w->hint_fiber, fiber, memory_order_relaxed);
    if (!mine && !w->queued) { /* the owner starts it */
        if (!inbox_push(w)) {
            w->waiter = NULL;
            w->call = NULL;
            sp__spin_unlock(&ctx->lock);
            return -ESHUTDOWN; /* that worker has ended */
        }
        kick_owner = true;
    }
    sp__spin_unlock(&ctx->lock);
    if (old)
        destroy(old, NULL, false);
    if (kick_old)
        sp__iom_kick(io, old_owner);
    if (kick_owner)
        sp__iom_kick(io, owner);
    if (mine && !w->started) {
        /* Started after unlocking: if it was disarmed meanwhile, it fires
         * idle once and stops. Only this thread touches `started`. */
        ev_io_start(loop_of(w), &w->io);
        w->started = true;
    }
    return 0;
}

/* Where one arming of a wait sits, to take it back. */
typedef struct armed {
    sp_fd_ctx_t *ctx;
    int dir;
    uint32_t seq;
} armed_t;

static void withdraw(const armed_t *a, int n, io_waiter_t *waiter)
{
    /* The waiter was promised before it was marked unarmed, and the fiber
     * settles (waits for every promiser) after this. */
    if (atomic_load_explicit(&waiter->unarmed, memory_order_relaxed) == n)
        return;
    for (int i = 0; i < n; i++) {
        sp__spin_lock(&a[i].ctx->lock);
        sp_io_watch_t *w = a[i].ctx->watch[a[i].dir];
        if (w && w->waiter == waiter && w->seq == a[i].seq)
            w->waiter = NULL; /* stays started: the next wait reuses it */
        sp__spin_unlock(&a[i].ctx->lock);
    }
}

static void on_wait_timeout(void *waiter)
{
    sp__waiter_promise(waiter, -ETIMEDOUT);
    sp__waiter_deliver(waiter, true);
}

static int check_wants(const sp_io_want_t *wants, int n)
{
    if (n < 0 || n > SP_IO_WAIT_MAX)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (!wants[i].events || (wants[i].events & ~(SP_IO_READ | SP_IO_WRITE)))
            return -EINVAL;
    return 0;
}

/* The second half of a wait: the waiter is armed on k watches (rc: how
 * arming went). Park until woken, the timeout passes or the wait is
 * cancelled; then take back what is still armed. Inline in both waits, so
 * that a parked fiber holds one frame for its wait, not two: the frames of
 * a parked fiber are cold when it resumes, each line a cache miss. */
static inline int park_armed(sp_iomanager_t *io, int owner, io_waiter_t *waiter,
                             const armed_t *armed, int k, int rc,
                             int64_t timeout_us)
{
    sp_timer_id_t tid = 0;
    if (rc == 0 && timeout_us >= 0)
        rc = sp__timer_add_inline(sp__iom_timer_heap(io, owner),
                                  (uint64_t)timeout_us * 1000,
                                  on_wait_timeout, &waiter->base, &tid);
    if (rc == 0) {
        sp__waiter_wait(&waiter->base);
        /* The timer runs its callback on this thread, like this fiber: once
         * cancel says it already fired, that callback has completed. */
        if (tid)
            sp_timer_cancel(io, tid);
    }
    withdraw(armed, k, waiter);
    int result = sp__waiter_settle(&waiter->base);
    return rc == 0 ? result : rc;
}

/* Park the calling fiber, which runs on worker `owner` of io, until one of
 * the wants is ready, the timeout passes or the wait is cancelled. `ctxs`
 * holds each want's fd context. */
static int wait_on(sp_iomanager_t *io, int owner, const sp_io_want_t *wants,
                   sp_fd_ctx_t *const *ctxs, int n, int64_t timeout_us)
{
    io_waiter_t waiter;
    sp__waiter_init(&waiter.base);
    atomic_init(&waiter.unarmed, 0);
    /* Most waits are on one fd: keep the parked stack small (it is most of
     * an idle connection's memory) and allocate only for poll-sized sets. */
    armed_t few[2], *armed = few;
    if (2 * n > 2 && !(armed = malloc(sizeof *armed * 2 * (size_t)n)))
        return -ENOMEM;
    int k = 0, rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        for (int dir = 0; dir < 2 && rc == 0; dir++) {
            if (!(wants[i].events & (dir ? SP_IO_WRITE : SP_IO_READ)))
                continue;
            uint32_t seq = 0;
            rc = ctxs[i] ? arm(io, owner, true, ctxs[i], wants[i].fd, dir,
                               &waiter, NULL, &seq)
                         : -EBADF;
            if (rc == 0)
                armed[k++] = (armed_t){ctxs[i], dir, seq};
        }
    }
    rc = park_armed(io, owner, &waiter, armed, k, rc, timeout_us);
    if (armed != few)
        free(armed);
    return rc;
}

int sp_io_wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us)
{
    sp_iomanager_t *io = sp_iomanager_current();
    if (!io || !sp_fiber_current())
        return -EPERM;
    int rc = check_wants(wants, n);
    if (rc < 0)
        return rc;
    sp_fd_ctx_t *few[4] = {NULL}, **ctxs = few;
    if (n > 4 && !(ctxs = malloc(sizeof *ctxs * (size_t)n)))
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        ctxs[i] = sp__fd_ctx(wants[i].fd);
    rc = wait_on(io, sp__sched_self(&io->s)->index, wants, ctxs, n, timeout_us);
    if (ctxs != few)
        free(ctxs);
    return rc;
}

/* The hooks' wait: one fd, one direction. */
int sp__io_wait_fd(sp_fd_ctx_t *ctx, int fd, int event, int64_t timeout_us)
{
    sp_thread_t *t = sp__thread();
    sp_worker_t *self = t->worker;
    sp_iomanager_t *io = self ? sp__iom_of(self->s) : NULL;
    if (!io || t->current == &t->root)
        return -EPERM;
    if (!ctx)
        return -EBADF;
    io_waiter_t waiter;
    /* No timer: this fd's watch is the only waker (taken off it under the
     * fd's lock), so the waiter's counts need no locked instructions on a
     * line that is cold at the wake-up. */
    if (timeout_us < 0)
        sp__waiter_init_sole(&waiter.base);
    else
        sp__waiter_init(&waiter.base);
    atomic_init(&waiter.unarmed, 0);
    armed_t armed = {ctx, event == SP_IO_WRITE, 0};
    int rc = arm(io, self->index, true, ctx, fd, armed.dir, &waiter, NULL,
                 &armed.seq);
    return park_armed(io, self->index, &waiter, &armed, rc == 0, rc, timeout_us);
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
    sp_fd_ctx_t *ctx = sp__fd_ctx(fd);
    if (!io || !fn || !ctx || (event != SP_IO_READ && event != SP_IO_WRITE))
        return -EINVAL;
    /* Allocated here, where failing is an answer, not in the loop. */
    io_call_t *call = malloc(sizeof *call);
    if (!call)
        return -ENOMEM;
    *call = (io_call_t){fn, arg, 0};
    int rc = sp__sched_hold(&io->s);
    if (rc == 0) {
        sp_worker_t *self = sp__sched_self(&io->s);
        int owner = self ? self->index
                         : (int)(atomic_fetch_add(&io->s.rr, 1) %
                                 (unsigned)io->s.nworkers);
        uint32_t seq;
        rc = arm(io, owner, self != NULL, ctx, fd, event == SP_IO_WRITE, NULL,
                 call, &seq);
        if (rc < 0)
            sp__sched_release(&io->s);
    }
    if (rc < 0)
        free(call);
    return rc;
}

/* Take the armed events of fd in `dirs` (bit 0 READ, bit 1 WRITE) and
 * deliver them with `result`; with `closing` also retire the watches and
 * forget the fd. Returns how many were armed. */
static int end_events(int fd, unsigned dirs, int result, bool drop,
                      bool closing)
{
    sp_fd_ctx_t *ctx = sp__fd_ctx(fd);
    if (!ctx)
        return 0;
    taken_t t[2];
    bool got[2] = {false, false}, kick[2] = {false, false};
    sp_io_watch_t *mine[2] = {NULL, NULL};
    sp_iomanager_t *ios[2] = {NULL, NULL};
    int owners[2] = {0, 0};
    sp_waiter_t waiter;
    close_ack_t ack = {.pending = 0};
    sp__spin_lock(&ctx->lock);
    for (int dir = 0; dir < 2; dir++) {
        sp_io_watch_t *w = ctx->watch[dir];
        if (!(dirs & (1u << dir)) || !w)
            continue;
        got[dir] = take(w, result, drop, &t[dir]);
        if (closing) {
            ios[dir] = w->iom;
            owners[dir] = w->owner;
            w->closing = true;
            mine[dir] = retire(w, &kick[dir]);
            if (!mine[dir]) { /* its owner drops it: wait for that */
                w->ack = &ack;
                atomic_fetch_add(&ack.pending, 1);
            }
        }
    }
    if (closing)
        sp__fd_ctx_forget(ctx);
    bool wait = atomic_load(&ack.pending) > 0;
    if (wait && sp_iomanager_current() && sp_fiber_current()) {
        sp__waiter_init(&waiter);
        ack.waiter = &waiter;
    } else if (wait) {
        pthread_mutex_init(&ack.lock, NULL);
        pthread_cond_init(&ack.done, NULL);
    }
    sp__spin_unlock(&ctx->lock);
    for (int dir = 0; dir < 2; dir++) {
        if (got[dir])
            deliver(&t[dir]);
        if (mine[dir])
            destroy(mine[dir], NULL, true);
        if (kick[dir])
            sp__iom_kick(ios[dir], owners[dir]);
    }
    if (wait) {
        ack_wait(&ack);
        if (!ack.waiter) {
            pthread_mutex_destroy(&ack.lock);
            pthread_cond_destroy(&ack.done);
        }
    }
    return got[0] + got[1];
}

int sp_io_del(int fd, int event)
{
    if (event != SP_IO_READ && event != SP_IO_WRITE)
        return -EINVAL;
    return end_events(fd, event, -EINTR, true, false) ? 0 : -ENOENT;
}

int sp_io_cancel(int fd, int event)
{
    if (event != SP_IO_READ && event != SP_IO_WRITE)
        return -EINVAL;
    return end_events(fd, event, -ECANCELED, false, false) ? 0 : -ENOENT;
}

int sp_io_cancel_all(int fd)
{
    return end_events(fd, 3, -ECANCELED, false, false);
}

int sp_io_close_fd(int fd)
{
    return end_events(fd, 3, -EBADF, false, true);
}

int sp_io_close(int fd)
{
    sp_io_close_fd(fd);
    return close(fd) < 0 ? -errno : 0;
}
