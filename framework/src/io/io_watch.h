/* Internal to io/: a watch (one fd, one direction, one owner worker) and
 * what is taken off it. io_event.c arms watches and delivers readiness and
 * waits (the per-message path); io_watch.c retires and frees them, runs the
 * owners' inboxes and ends events (cancel, delete, close). The protocol is
 * described at the top of io_event.c. */
#ifndef SP_IO_WATCH_H
#define SP_IO_WATCH_H

#include <stdlib.h>

#include "base/fence.h"
#include "fd_table.h"
#include "iomanager_internal.h"

/* A fiber's wait on fds. `unarmed` counts the watches that took the waiter
 * off themselves (under their fd's lock): when all did, the waiting fiber
 * has nothing to withdraw. */
typedef struct io_waiter {
    sp__waiter_t base;
    _Atomic int unarmed;
    bool interrupted;     /* sp_fiber_interrupt ended it */
    const void *armed;    /* its one armed_t (io_event.c), for a sole wait */
} io_waiter_t;

/* Fields in the order a wait and its wake-up touch them: two cache lines
 * (the watch is allocated on a line boundary). The first is all on_ready
 * reads: libev's part (which it has just read), the fd's context and the
 * prefetch hints; it asks for the second, which ready_one reads under the
 * fd's lock. */
typedef struct sp__io_watch {
    ev_io io; /* first: libev hands this pointer to on_ready; io.data is
                 the fd's context (set once), read with ctx_of() */
    /* The armed fiber and its parked frames, for on_ready to prefetch;
     * read racily (stale costs a prefetch). */
    _Atomic uintptr_t hint_fiber, hint_frames;
    /* Guarded by the fd's lock, except as noted. */
    io_waiter_t *waiter;  /* armed by a fiber, or */
    struct io_callback *call; /* armed with a callback, or neither: idle */
    sp_iomanager_t *iom; /* (set once) */
    int dir, owner;      /* (set once) */
    uint32_t seq;  /* numbers each arming */
    bool queued;   /* in the owner's inbox */
    bool retired;  /* no longer its fd's watch: the owner frees it */
    bool closing;  /* retired because its fd is being closed */
    bool started;  /* owner thread only */
    struct close_ack *ack; /* a closer waiting for the owner to drop it */
    struct sp__io_watch *next; /* inbox link */
    sp__link_t all; /* in the owner's `watches`, under its lock */
} sp__io_watch_t;

static inline sp__fd_ctx_t *ctx_of(const sp__io_watch_t *w)
{
    return w->io.data;
}

/* A callback event, allocated when it is armed (sp_io_add) with a queue
 * slot reserved on worker `rsv` for its task, so that delivering it needs
 * no memory; the task that runs it frees it. */
typedef struct io_callback {
    sp_io_fn fn;
    void *arg;
    int result;
    int rsv;
} io_callback_t;

/* What was taken off a watch, to deliver once the lock is released. */
typedef struct taken {
    sp_iomanager_t *io;
    sp__waiter_t *waiter;
    io_callback_t *call;
    int result;
    bool drop; /* deleted: no wake-up, no callback */
} taken_t;

static inline struct ev_loop *loop_of(const sp__io_watch_t *w)
{
    return w->iom->w[w->owner]->loop;
}

/* The watch lock: what guards an fd's watches (ctx->watch[], wait_seq[],
 * home[]) and each watch's armed state (waiter, call, seq, queued,
 * retired...). The per-message path (a wait arming its fd's watch, the
 * poll taking the waiter off it, the waiter withdrawn) runs on the thread
 * that made the watch, its home (ctx->home[dir], the owner's thread), and
 * takes the fast side: a plain store of ctx->home_busy[dir], a compiler
 * fence, then a look at ctx->remote[dir] and home[dir]; no locked
 * instruction. Any other thread takes ctx->lock, sets remote[dir] for
 * every direction homed elsewhere, makes every thread fence
 * (sp__fence_heavy) and waits for home_busy[dir] to drop: one of the two
 * sides always sees the other (base/fence.h). The home thread itself,
 * finding remote set, takes ctx->lock like anyone. home[dir] changes only
 * under ctx->lock, to the locking thread's token or 0, so no thread is on
 * the fast side of a direction it does not own. A watch is freed only by
 * its owner, so the home thread may read its watch unlocked. The owner's
 * thread acting only on the fields of one of its own watches (the poll on
 * a ready watch, the inbox) needs ctx->lock alone when it is not on the
 * fast side: the only fast side that touches a watch is its owner's.
 * Without asymmetric fences (and under TSan, which cannot see them) no
 * direction gets a home, and everyone takes ctx->lock. */
void sp__watch_lock(sp__fd_ctx_t *ctx);
void sp__watch_unlock(sp__fd_ctx_t *ctx);

static inline bool sp__watch_fast_on(void)
{
#ifdef SP_TSAN
    return false;
#else
    return sp__fence_asym();
#endif
}

/* The fast side of direction dir's lock for the calling thread, whose
 * token is `me` (sp__thread_t, never 0): true if taken (it is the
 * direction's home and no other thread holds the lock; release with
 * watch_release_home), else take sp__watch_lock. */
static inline bool watch_try_home(sp__fd_ctx_t *ctx, int dir, uint32_t me)
{
    if (atomic_load_explicit(&ctx->home[dir], memory_order_relaxed) != me)
        return false;
    atomic_store_explicit(&ctx->home_busy[dir], true, memory_order_relaxed);
    sp__fence_light();
    if (!atomic_load_explicit(&ctx->remote[dir], memory_order_acquire) &&
        atomic_load_explicit(&ctx->home[dir], memory_order_relaxed) == me)
        return true;
    atomic_store_explicit(&ctx->home_busy[dir], false, memory_order_release);
    return false;
}

static inline void watch_release_home(sp__fd_ctx_t *ctx, int dir)
{
    sp__fence_light();
    atomic_store_explicit(&ctx->home_busy[dir], false, memory_order_release);
}

/* Either side of direction dir's lock: the fast one (true) if the calling
 * thread may take it, else sp__watch_lock. Released by watch_unlock. */
static inline bool watch_lock(sp__fd_ctx_t *ctx, int dir, uint32_t me)
{
    if (watch_try_home(ctx, dir, me))
        return true;
    sp__watch_lock(ctx);
    return false;
}

static inline void watch_unlock(sp__fd_ctx_t *ctx, int dir, bool fast)
{
    if (fast)
        watch_release_home(ctx, dir);
    else
        sp__watch_unlock(ctx);
}

/* ctx->watch[dir], the lock held. */
static inline sp__io_watch_t *watch_of(sp__fd_ctx_t *ctx, int dir)
{
    return atomic_load_explicit(&ctx->watch[dir], memory_order_relaxed);
}

/* io_event.c: the hooks' wait with a deadline. */
int sp__io_hook_wait_until(sp__fd_ctx_t *ctx, int fd, int event, uint64_t *deadline_ns,
                           int64_t fd_us);

/* io_event.c: take waiter off the n watches of its wait (armed_t[n]) that
 * still have it. */
void sp__io_withdraw(const void *armed, int n, io_waiter_t *waiter);

/* The task that runs a callback event (io_watch.c). */
void sp__io_run_callback(void *p);

/* Lock held. Take the waiter or callback off w; false if w is idle. */
static inline bool take(sp__io_watch_t *w, int result, bool drop, taken_t *out)
{
    if (!w->waiter && !w->call)
        return false;
    sp__waiter_t *waiter = w->waiter ? &w->waiter->base : NULL;
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

static inline void deliver(const taken_t *t)
{
    if (t->waiter) {
        if (!t->drop)
            sp__waiter_deliver(t->waiter, true);
        return;
    }
    if (t->drop) {
        sp__sched_unreserve(&t->io->s.workers[t->call->rsv], false);
        free(t->call);
    } else {
        t->call->result = t->result;
        /* Holding the event's reference, the scheduler cannot stop, and the
         * task's slot was reserved when the event was armed. */
        if (sp__sched_submit_reserved(&t->io->s, t->call->rsv,
                                      sp__io_run_callback, t->call,
                                      SP_ANY_WORKER) != 0)
            abort(); /* cannot fail, see above */
    }
    sp__sched_release(&t->io->s); /* the callback event's hold */
}


struct close_ack;
/* Lock held: w leaves its fd. Returns w if the caller, being the owner,
 * must free it (sp__watch_destroy) after unlocking; otherwise the owner's
 * inbox has it and *kick_owner says to wake the owner. */
sp__io_watch_t *sp__watch_retire(sp__io_watch_t *w, bool *kick_owner);
/* ctx lock held: leave w for its owner; false if the owner has ended. */
bool sp__watch_inbox_push(sp__io_watch_t *w);
/* A new watch joins its owner's list (io->w[owner]->watches). */
void sp__watch_track(sp__io_watch_t *w);
/* Owner thread: stop and free w (see io_watch.c). */
void sp__watch_destroy(sp__io_watch_t *w, struct close_ack *ack, bool closing);

#endif
