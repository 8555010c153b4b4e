/* The life of a watch off the per-message path: leaving its fd (retire),
 * the owner's list of watches and its inbox, freeing, a worker that ends,
 * and ending the events armed on an fd (delete, cancel, close). See
 * io_event.c for the protocol. */
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "io_watch.h"

void sp__watch_lock(sp__fd_ctx_t *ctx)
{
    sp__spin_lock(&ctx->lock);
    if (!sp__watch_fast_on())
        return;
    const sp__thread_t *t = sp__thread_peek();
    uint32_t me = t ? t->token : 0;
    bool wait[2] = {false, false};
    for (int dir = 0; dir < 2; dir++) {
        uint32_t home = atomic_load_explicit(&ctx->home[dir], memory_order_relaxed);
        if (home && home != me) {
            atomic_store(&ctx->remote[dir], true);
            wait[dir] = true;
        }
    }
    if (!wait[0] && !wait[1])
        return;
    sp__fence_heavy();
    for (int dir = 0; dir < 2; dir++)
        for (unsigned n = 1; wait[dir] && atomic_load(&ctx->home_busy[dir]); n++)
            if (n % 64 == 0)
                sched_yield(); /* the home thread may have been preempted */
}

void sp__watch_unlock(sp__fd_ctx_t *ctx)
{
    for (int dir = 0; dir < 2; dir++)
        if (atomic_load_explicit(&ctx->remote[dir], memory_order_relaxed))
            atomic_store_explicit(&ctx->remote[dir], false, memory_order_release);
    sp__spin_unlock(&ctx->lock);
}

static bool on_owner(const sp__io_watch_t *w)
{
    sp__worker_t *self = sp__sched_self(&w->iom->s);
    return self && self->index == w->owner;
}

/* ctx lock held. Leave w for its owner; false if the owner's worker has
 * ended (its loop is dead: the caller may act on w itself). */
bool sp__watch_inbox_push(sp__io_watch_t *w)
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
    sp__waiter_t *waiter;
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

void sp__io_run_callback(void *p)
{
    io_callback_t c = *(io_callback_t *)p;
    free(p);
    c.fn(c.arg, c.result);
}

/* Lock held: w leaves its fd. Returns w if the caller, being the owner,
 * must destroy it after unlocking; otherwise the owner's inbox has it. */
sp__io_watch_t *sp__watch_retire(sp__io_watch_t *w, bool *kick_owner)
{
    atomic_store_explicit(&ctx_of(w)->watch[w->dir], NULL, memory_order_relaxed);
    atomic_store_explicit(&ctx_of(w)->home[w->dir], 0, memory_order_relaxed);
    w->retired = true;
    if (w->queued)
        return NULL;
    if (on_owner(w) || !sp__watch_inbox_push(w))
        return w;
    *kick_owner = true;
    return NULL;
}

void sp__watch_track(sp__io_watch_t *w)
{
    iom_worker_t *x = w->iom->w[w->owner];
    pthread_mutex_lock(&x->watches_lock);
    sp__list_push_front(&x->watches, &w->all);
    pthread_mutex_unlock(&x->watches_lock);
}

static void untrack(sp__io_watch_t *w)
{
    iom_worker_t *x = w->iom->w[w->owner];
    pthread_mutex_lock(&x->watches_lock);
    sp__list_remove(&x->watches, &w->all);
    pthread_mutex_unlock(&x->watches_lock);
}

/* Owner thread. When the fd is being closed, let the loop look once more
 * before the closer goes on: libev drops an fd from its epoll set lazily,
 * at the fd's next event, and that must happen before close(2) can give
 * the number to a new file. Never called from inside ev_run: no code that
 * frees a watch runs in the loop's callbacks, so a ready batch never holds
 * a freed watch. */
void sp__watch_destroy(sp__io_watch_t *w, close_ack_t *ack, bool closing)
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
        sp__list_t *all = &io->w[i]->watches;
        while (all->head) {
            sp__io_watch_t *w = sp__list_entry(all->head, sp__io_watch_t, all);
            sp__list_remove(all, &w->all);
            sp__fd_ctx_t *ctx = ctx_of(w);
            sp__watch_lock(ctx);
            if (watch_of(ctx, w->dir) == w) {
                atomic_store_explicit(&ctx->watch[w->dir], NULL, memory_order_relaxed);
                atomic_store_explicit(&ctx->home[w->dir], 0, memory_order_relaxed);
            }
            sp__watch_unlock(ctx);
            free(w);
        }
    }
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
    sp__io_watch_t *drop = NULL;
    bool armed = false;
    for (sp__link_t *l = io->w[worker]->watches.head; l; l = l->next) {
        sp__io_watch_t *w = sp__list_entry(l, sp__io_watch_t, all);
        bool kick = false; /* stays false: retired by its owner */
        sp__watch_lock(ctx_of(w));
        if (w->waiter || w->call || (w->queued && !w->retired)) {
            armed = true;
        } else if (!w->retired && sp__watch_retire(w, &kick)) {
            w->next = drop;
            drop = w;
        }
        sp__watch_unlock(ctx_of(w));
    }
    while (drop) {
        sp__io_watch_t *next = drop->next;
        sp__watch_destroy(drop, NULL, false);
        drop = next;
    }
    return !armed;
}

bool sp__io_drain_inbox(sp_iomanager_t *io, int worker)
{
    bool looked = false;
    iom_worker_t *x = io->w[worker];
    sp__io_watch_t *fifo = atomic_exchange(&x->inbox, NULL);
    SP__SLIST_REVERSE(sp__io_watch_t, fifo, next); /* the inbox is a stack */
    while (fifo) {
        sp__io_watch_t *w = fifo;
        fifo = w->next;
        sp__spin_lock(&ctx_of(w)->lock); /* its owner, on w alone (io_watch.h) */
        w->queued = false;
        bool retired = w->retired, armed = w->waiter || w->call;
        bool closing = w->closing;
        close_ack_t *ack = w->ack;
        sp__spin_unlock(&ctx_of(w)->lock);
        if (retired) {
            sp__watch_destroy(w, ack, closing);
            looked |= closing;
        } else if (armed && !w->started) {
            ev_io_start(x->loop, &w->io);
            w->started = true;
        }
    }
    return looked;
}

/* Take the armed events of fd in `dirs` (bit 0 READ, bit 1 WRITE) and
 * deliver them with `result`; with `closing` also retire the watches and
 * forget the fd. Returns how many were armed. */
static int end_events(int fd, unsigned dirs, int result, bool drop,
                      bool closing)
{
    sp__fd_ctx_t *ctx = sp__fd_ctx(fd);
    if (!ctx)
        return 0;
    taken_t t[2];
    bool got[2] = {false, false}, kick[2] = {false, false};
    sp__io_watch_t *mine[2] = {NULL, NULL};
    sp_iomanager_t *ios[2] = {NULL, NULL};
    int owners[2] = {0, 0};
    sp__waiter_t waiter;
    close_ack_t ack = {.pending = 0};
    sp__watch_lock(ctx);
    for (int dir = 0; dir < 2; dir++) {
        sp__io_watch_t *w = watch_of(ctx, dir);
        if (!(dirs & (1u << dir)) || !w)
            continue;
        got[dir] = take(w, result, drop, &t[dir]);
        if (closing) {
            ios[dir] = w->iom;
            owners[dir] = w->owner;
            w->closing = true;
            mine[dir] = sp__watch_retire(w, &kick[dir]);
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
    sp__watch_unlock(ctx);
    for (int dir = 0; dir < 2; dir++) {
        if (got[dir])
            deliver(&t[dir]);
        if (mine[dir])
            sp__watch_destroy(mine[dir], NULL, true);
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
