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
 * delete, close) under the watch lock (io_watch.h: without a locked
 * instruction on the watch's own thread) and deliver it after unlocking: a
 * waiting fiber is woken (it resumes on the worker it runs on; fibers do
 * not migrate), a callback is scheduled as a task. Requests for the owner
 * (start a watch armed from another thread; free a watch whose fd closed or
 * moved to another worker) go through the owner's inbox.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "hook_fast.h"
#include "io_watch.h"

/* How far below its waiter (in the wait's frame: sp__io_hook_wait for the
 * hooks) a parked fiber's saved stack pointer sits: about 250 bytes of
 * park-path frames with gcc -O2 on x86-64. A guess that is off costs a
 * line or two of the prefetch, nothing else. */
#define PARK_DEPTH 256

/* On the owner's thread, for one watch found ready. A waiting fiber of
 * this worker goes straight onto the worker's list of fibers to run as
 * soon as the poll returns (sp__waiter_deliver_on), as a callback server's
 * handlers run, with no trip through a locked queue. */
static void ready_one(struct ev_loop *loop, sp__io_watch_t *w, uint32_t me)
{
    sp__fd_ctx_t *ctx = ctx_of(w);
    taken_t t;
    bool fast = watch_try_home(ctx, w->dir, me);
    if (!fast) /* this thread owns w (io_watch.h) */
        sp__spin_lock(&ctx->lock);
    bool got = !w->retired && take(w, 0, false, &t);
    if (fast)
        watch_release_home(ctx, w->dir);
    else
        sp__spin_unlock(&ctx->lock);
    if (got) {
        if (t.waiter)
            sp__waiter_deliver_on(t.waiter, &w->iom->s.workers[w->owner]);
        else
            deliver(&t);
        return;
    }
    /* Nobody waits (or the watch is on its way out): stop it until the next
     * wait, or level-triggered epoll reports the fd again and again. */
    ev_io_stop(loop, &w->io);
    w->started = false;
}

static void ready_flush(struct ev_loop *loop, iom_worker_t *x)
{
    uint32_t me = sp__thread_peek()->token;
    for (unsigned i = 0; i < x->nbatch; i++)
        ready_one(loop, x->batch[i], me);
    x->nbatch = 0;
}

/* libev's callback for every watch: it notes the watch in the batch and
 * asks for the lines handling it will touch (the fd's entry, the watch's
 * second line, the waiting fiber and its frames). With many connections
 * each is likely cold; asked for across the batch, they arrive together
 * instead of one dependent miss after another for each event (see
 * `AB_BIN=... bench/peers.sh echo 1000`). */
static void on_ready(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)revents;
    sp__io_watch_t *w = (sp__io_watch_t *)io;
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

/* libev calls back last in, first out: the fibers woken here are turned
 * round to run in the order the kernel reported their fds, so that under
 * load every connection waits about one poll (last in, first out would
 * serve a connection alternately first and last and double the tail
 * latency). */
void sp__io_invoke_pending(struct ev_loop *loop)
{
    iom_worker_t *x = ev_userdata(loop);
    sp__worker_t *self = &x->timers.sched->workers[x->timers.worker];
    unsigned from = sp__sched_ncollected(self);
    ev_invoke_pending(loop);
    ready_flush(loop, x);
    sp__sched_reverse_collected(self, from);
}

/* The watch lock held: w, an idle watch of direction dir, takes the waiter
 * or the callback; *seq numbers this arming. */
static inline void attach(sp__fd_ctx_t *ctx, sp__io_watch_t *w, int dir,
                          io_waiter_t *waiter, io_callback_t *call, uint32_t *seq)
{
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
}

/* Arm the fd's watch of direction dir for a waiter or a callback, on
 * worker `owner` (`mine`: the calling thread's). On success *seq numbers
 * this arming. */
static int arm(sp_iomanager_t *io, int owner, bool mine, sp__fd_ctx_t *ctx,
               int fd, int dir, io_waiter_t *waiter, io_callback_t *call,
               uint32_t *seq)
{
    sp__io_watch_t *old = NULL;
    bool kick_old = false, kick_owner = false;
    int old_owner = 0;
    sp__watch_lock(ctx);
    sp__io_watch_t *w = watch_of(ctx, dir);
    if (w && (w->waiter || w->call)) {
        sp__watch_unlock(ctx);
        return -EEXIST;
    }
    if (w && (w->owner != owner || w->iom != io)) { /* moved elsewhere */
        old_owner = w->owner;
        old = sp__watch_retire(w, &kick_old);
        w = NULL;
    }
    if (!w) {
        w = aligned_alloc(64, (sizeof *w + 63) & ~(size_t)63);
        if (w)
            memset(w, 0, sizeof *w);
        if (!w) {
            sp__watch_unlock(ctx);
            return -ENOMEM;
        }
        ev_io_init(&w->io, on_ready, fd, dir ? EV_WRITE : EV_READ);
        w->io.data = ctx;
        w->iom = io;
        w->dir = dir;
        w->owner = owner;
        atomic_store_explicit(&ctx->watch[dir], w, memory_order_relaxed);
        sp__watch_track(w);
    }
    attach(ctx, w, dir, waiter, call, seq);
    /* The owner's thread takes the watch lock's fast side from now on: it
     * is this one, so no other is on it meanwhile. */
    if (mine && sp__watch_fast_on())
        atomic_store_explicit(&ctx->home[dir], sp__thread_peek()->token,
                              memory_order_relaxed);
    if (!mine && !w->queued) { /* the owner starts it */
        if (!sp__watch_inbox_push(w)) {
            w->waiter = NULL;
            w->call = NULL;
            sp__watch_unlock(ctx);
            return -ESHUTDOWN; /* that worker has ended */
        }
        kick_owner = true;
    }
    sp__watch_unlock(ctx);
    if (old)
        sp__watch_destroy(old, NULL, false);
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

/* The common case of a fiber's wait: a fiber of this worker waits again
 * on its connection, whose watch is this worker's, idle and started;
 * arming it is attach()'s stores. `started` is read only once the watch is
 * known to be this thread's: only its owner's thread writes it. Inline in
 * the one-fd wait, with arm() for the rest (and for waits on several fds).
 * `me`: the calling thread's token. */
static inline int arm_wait(sp_iomanager_t *io, int owner, uint32_t me, sp__fd_ctx_t *ctx,
                           int fd, int dir, io_waiter_t *waiter, uint32_t *seq)
{
    if (watch_try_home(ctx, dir, me)) {
        sp__io_watch_t *w = watch_of(ctx, dir);
        bool idle = w && !w->waiter && !w->call && w->owner == owner && w->iom == io &&
                    w->started;
        if (idle)
            attach(ctx, w, dir, waiter, NULL, seq);
        watch_release_home(ctx, dir);
        if (idle)
            return 0;
    }
    return arm(io, owner, true, ctx, fd, dir, waiter, NULL, seq);
}

/* Where one arming of a wait sits, to take it back. */
typedef struct armed {
    sp__fd_ctx_t *ctx;
    int dir;
    uint32_t seq;
} armed_t;

/* The waiter off the watches it is still armed on (a wait that ended by
 * its timeout, an interrupt or another of its fds). External, so that it
 * is not inlined into the waits: their frame, which a parked fiber keeps,
 * stays small enough to be inlined itself. */
void sp__io_withdraw(const void *armed, int n, io_waiter_t *waiter)
{
    const armed_t *a = armed;
    uint32_t me = sp__thread_peek()->token;
    for (int i = 0; i < n; i++) {
        bool fast = watch_lock(a[i].ctx, a[i].dir, me);
        sp__io_watch_t *w = watch_of(a[i].ctx, a[i].dir);
        if (w && w->waiter == waiter && w->seq == a[i].seq)
            w->waiter = NULL; /* stays started: the next wait reuses it */
        watch_unlock(a[i].ctx, a[i].dir, fast);
    }
}

static inline void withdraw(const armed_t *a, int n, io_waiter_t *waiter)
{
    /* The waiter was promised before it was marked unarmed, and the fiber
     * settles (waits for every promiser) after this. */
    if (atomic_load_explicit(&waiter->unarmed, memory_order_relaxed) != n)
        sp__io_withdraw(a, n, waiter);
}

/* sp_fiber_interrupt's way into an fd wait. A wait with several wakers
 * takes one more promise; a sole one (the hooks' wait without a timeout,
 * whose watch is its only waker) is taken off its watch under the watch
 * lock, as the poll would, so it keeps a single waker. */
static int cancel_wait(sp__waiter_t *base, int result)
{
    io_waiter_t *waiter = (io_waiter_t *)(void *)base;
    if (!base->sole) {
        int r = sp__waiter_cancel_promise(base, result);
        waiter->interrupted = r == SP_CANCEL_DECIDED;
        return r;
    }
    const armed_t *a = waiter->armed;
    taken_t t;
    sp__watch_lock(a->ctx);
    sp__io_watch_t *w = watch_of(a->ctx, a->dir);
    bool decided = w && w->waiter == waiter && w->seq == a->seq && take(w, result, false, &t);
    if (decided)
        waiter->interrupted = true;
    sp__watch_unlock(a->ctx);
    return decided ? SP_CANCEL_DECIDED : SP_CANCEL_LATE; /* the caller wakes it */
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
        /* For sp_iomanager_stats: written by the owner thread only. */
        _Atomic unsigned *waiting = &io->w[owner]->waiting;
        unsigned n = atomic_load_explicit(waiting, memory_order_relaxed);
        atomic_store_explicit(waiting, n + 1, memory_order_relaxed);
        sp__waiter_wait(&waiter->base);
        n = atomic_load_explicit(waiting, memory_order_relaxed);
        atomic_store_explicit(waiting, n - 1, memory_order_relaxed);
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
                   sp__fd_ctx_t *const *ctxs, int n, int64_t timeout_us,
                   bool *interrupted)
{
    io_waiter_t waiter;
    sp__waiter_init(&waiter.base);
    waiter.base.cancel = cancel_wait;
    waiter.base.kind = SP__WAIT_FD_ANY;
    waiter.base.fd = wants[0].fd;
    waiter.interrupted = false;
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
            rc = ctxs[i] ? arm(io, owner, true, ctxs[i], wants[i].fd, dir, &waiter, NULL, &seq)
                         : -EBADF;
            if (rc == 0)
                armed[k++] = (armed_t){ctxs[i], dir, seq};
        }
    }
    rc = park_armed(io, owner, &waiter, armed, k, rc, timeout_us);
    if (armed != few)
        free(armed);
    *interrupted = waiter.interrupted;
    return rc;
}

/* sp_io_wait_any, and whether an interrupt or a deadline ended it. */
static int wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us,
                    bool *interrupted)
{
    *interrupted = false;
    sp_iomanager_t *io = sp_iomanager_current();
    if (!io || !sp_fiber_current())
        return -EPERM;
    int rc = check_wants(wants, n);
    if (rc < 0)
        return rc;
    sp__fd_ctx_t *few[4] = {NULL}, **ctxs = few;
    if (n > 4 && !(ctxs = malloc(sizeof *ctxs * (size_t)n)))
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        ctxs[i] = sp__fd_ctx_get(wants[i].fd);
    rc = wait_on(io, sp__sched_self(&io->s)->index, wants, ctxs, n, timeout_us,
                 interrupted);
    if (ctxs != few)
        free(ctxs);
    return rc;
}

int sp_io_wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us)
{
    bool interrupted;
    return wait_any(wants, n, timeout_us, &interrupted);
}

int sp__io_hook_wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us)
{
    bool interrupted;
    int rc = wait_any(wants, n, timeout_us, &interrupted);
    return interrupted && rc < 0 ? rc - SP_HOOK_INTERRUPTED : rc;
}

/* One fd, one direction: the framework's and (`hook`: an interrupt's
 * answer as the bridge's wait_fd gives it) the hooks' wait. Both call it
 * last, so that it is a tail call: a parked fiber keeps one frame for its
 * wait, whichever way it came. */
static int wait_one(sp__fd_ctx_t *ctx, int fd, int event, int64_t timeout_us, bool hook)
{
    /* Read before the wait only: after it this fiber may be elsewhere. */
    sp__thread_t *t = sp__thread_peek();
    sp__worker_t *self = t ? t->worker : NULL;
    sp_iomanager_t *io = self ? sp__iom_of(self->s) : NULL;
    if (!io || t->current == &t->root)
        return -EPERM;
    if (!ctx)
        return -EBADF;
    io_waiter_t waiter;
    /* No timer: this fd's watch is the only waker (taken off it under the
     * watch lock), so the waiter's counts need no locked instructions on a
     * line that is cold at the wake-up. */
    sp__waiter_init_for(&waiter.base, t->current, timeout_us < 0);
    atomic_init(&waiter.unarmed, 0);
    waiter.base.cancel = cancel_wait;
    waiter.base.kind = event == SP_IO_WRITE ? SP__WAIT_FD_WRITE : SP__WAIT_FD_READ;
    waiter.base.fd = fd;
    waiter.interrupted = false;
    armed_t armed = {ctx, event == SP_IO_WRITE, 0};
    waiter.armed = &armed;
    int rc = arm_wait(io, self->index, t->token, ctx, fd, armed.dir, &waiter, &armed.seq);
    rc = park_armed(io, self->index, &waiter, &armed, rc == 0, rc, timeout_us);
    /* The hooks set errno to an interrupt's err as it is (task.h). */
    return hook && waiter.interrupted && rc < 0 ? rc - SP_HOOK_INTERRUPTED : rc;
}

int sp__io_wait_fd(sp__fd_ctx_t *ctx, int fd, int event, int64_t timeout_us)
{
    return wait_one(ctx, fd, event, timeout_us, false);
}

/* The hooks' wait with a deadline (see below); SP_HOOK_FD_DEADLINE
 * becomes now + fd_us, the fd's own timeout. External: the wait without
 * one, every message's, stays a few instructions and a tail call, with no
 * frame of its own. */
int sp__io_hook_wait_until(sp__fd_ctx_t *ctx, int fd, int event, uint64_t *deadline_ns,
                           int64_t fd_us)
{
    uint64_t now = sp__now_ns();
    if (*deadline_ns == SP_HOOK_FD_DEADLINE)
        *deadline_ns = now + (uint64_t)fd_us * 1000;
    if (now >= *deadline_ns)
        return -ETIMEDOUT;
    return wait_one(ctx, fd, event, (int64_t)((*deadline_ns - now + 999) / 1000), true);
}

/* The bridge's wait_fd (hook_bridge.h). */
int sp__io_hook_wait(sp__fd_ctx_t *ctx, int fd, int event, uint64_t *deadline_ns)
{
    if (event == SP_IO_READ)
        atomic_store_explicit(&ctx->drained, false, memory_order_relaxed);
    int64_t fd_us = 0;
    if (*deadline_ns == SP_HOOK_FD_DEADLINE &&
        (fd_us = sp__fd_timeout_us(ctx, event == SP_IO_READ)) < 0)
        *deadline_ns = 0; /* the fd has no timeout: the call has none */
    if (*deadline_ns)
        return sp__io_hook_wait_until(ctx, fd, event, deadline_ns, fd_us);
    return wait_one(ctx, fd, event, -1, true);
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
    sp__fd_ctx_t *ctx = sp__fd_ctx_get(fd);
    if (!io || !fn || !ctx || (event != SP_IO_READ && event != SP_IO_WRITE))
        return -EINVAL;
    /* Allocated here, where failing is an answer, not in the loop: the
     * record, and a queue slot for the task that will run it (deliver). */
    io_callback_t *call = sp__malloc(sizeof *call);
    if (!call)
        return -ENOMEM;
    int rc = sp__sched_hold(&io->s);
    if (rc == 0) {
        sp__worker_t *self = sp__sched_self(&io->s);
        int owner = self ? self->index
                         : (int)(atomic_fetch_add(&io->s.rr, 1) %
                                 (unsigned)io->s.nworkers);
        *call = (io_callback_t){fn, arg, 0, owner};
        uint32_t seq;
        rc = sp__sched_reserve(&io->s.workers[owner], false);
        if (rc == 0 && (rc = arm(io, owner, self != NULL, ctx, fd,
                                 event == SP_IO_WRITE, NULL, call, &seq)) < 0)
            sp__sched_unreserve(&io->s.workers[owner], false);
        if (rc < 0)
            sp__sched_release(&io->s);
    }
    if (rc < 0)
        free(call);
    return rc;
}
