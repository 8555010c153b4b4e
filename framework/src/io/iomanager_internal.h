/* Internal: the IOManager object, shared by iomanager.c (workers, loops,
 * timers) and io_event.c (fd events). */
#ifndef SP_IOMANAGER_INTERNAL_H
#define SP_IOMANAGER_INTERNAL_H

#include <ev.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/list.h"
#include "fd_table.h"
#include "sched/scheduler_internal.h"
#include "spindle/iomanager.h"
#include "timer_internal.h"

struct sp__io_watch;

/* One worker slot. Slots are allocated separately and never move: other
 * threads reach a slot by index (kicks, timer ids, watch owners) at any
 * time, and libev keeps pointers to the watchers embedded here. A slot for
 * an extra worker (monitor growth) gets its heap and inbox when the slots
 * are sized and its loop and pipe when its first thread starts; all of it
 * lives until the IOManager is destroyed, so a stale timer id or a late
 * tickle of a retired extra still lands on live memory. */
enum { READY_BATCH = 64 };

typedef struct iom_worker {
    struct ev_loop *loop; /* NULL until the slot's first thread */
    int pipe_rd, pipe_wr; /* -1 until then */
    ev_io pipe_io;
    /* The wake-up for the earliest timer (timer_wake.c): libev's timeout
     * for a far deadline, a timerfd for a near one. Owner thread. */
    ev_timer wake_timer;
    ev_io tfd_io;
    int tfd;         /* -1 until the loop exists */
    uint64_t tfd_at; /* the deadline the timerfd is armed to, 0 = none */
    _Atomic(struct sp__io_watch *) inbox; /* watches for the owner to act on */
    pthread_mutex_t inbox_lock;          /* pushes versus the worker ending */
    bool gone;                           /* no thread runs it: no inbox */
    sp__timer_heap_t timers;
    /* The watches it owns, to drop the idle ones when an extra retires and
     * to free them all at the end. */
    pthread_mutex_t watches_lock;
    sp__list_t watches; /* of sp__io_watch_t, by their `all` link */
    /* Fibers waiting on this worker's fds, for sp_iomanager_stats: written
     * by the owner only, atomic so that stats may read it. */
    _Atomic unsigned waiting;
    /* The watches libev is reporting ready: on_ready notes each and asks
     * for its cold lines; they are handled together once libev has called
     * back for all of them (or READY_BATCH of them). Only libev's
     * callbacks run inside the loop, and none frees a watch, so a noted
     * watch is still there when it is handled. Owner thread. */
    struct sp__io_watch *batch[READY_BATCH];
    unsigned nbatch;
} iom_worker_t;

/* The worker's timer wake-up, on its new loop: 0 or -errno. */
int sp__wake_open(iom_worker_t *x);
void sp__wake_close(iom_worker_t *x);
/* Before a blocking ev_run: make it end by `first`, the earliest deadline
 * (ns, in the future; 0 = none). After it: sp__wake_after. */
void sp__wake_before(iom_worker_t *x, uint64_t first);
void sp__wake_after(iom_worker_t *x);

/* The loop's invoke step (ev_set_invoke_pending_cb): libev's callbacks,
 * then the batch they noted. */
void sp__io_invoke_pending(struct ev_loop *loop);
struct sp_iomanager {
    sp_scheduler_t s; /* first: an IOManager is a scheduler */
    iom_worker_t **w; /* nw slots: the base workers, then the extras */
    int nw;
};

/* The IOManager's parts that the files below it (io_event.c, io_watch.c,
 * timer.c) and the layers above use are reached here, inline, so that
 * iomanager.c (the loop, the workers' life) calls them and none calls it
 * back. */

/* The scheduler idle step of every IOManager (iomanager.c): how one is
 * told from a plain scheduler. */
void sp__iom_idle(sp_scheduler_t *s, int worker);

/* s as an IOManager, or NULL if it is a plain scheduler. */
static inline sp_iomanager_t *sp__iom_of(sp_scheduler_t *s)
{
    return s && s->ops.idle == sp__iom_idle ? (sp_iomanager_t *)s : NULL;
}

/* The timer heap of worker slot `worker` (base or extra), or NULL past the
 * slots. */
static inline sp__timer_heap_t *sp__iom_timer_heap(sp_iomanager_t *io, int worker)
{
    return worker >= 0 && worker < io->nw ? &io->w[worker]->timers : NULL;
}

/* Wake `worker` from its poll: a byte down its pipe, with a raw syscall
 * (no trip through the hooks). */
static inline void sp__iom_tickle(sp_iomanager_t *io, int worker)
{
    char c = 1;
    long r = syscall(SYS_write, io->w[worker]->pipe_wr, &c, 1);
    (void)r; /* a full pipe already guarantees a wake-up */
}

/* Wake `worker` if it sleeps, after something was left for it (an inbox
 * entry, an earlier timer): a busy worker looks at its inbox and timers
 * before it next blocks, so only a sleeping one needs the pipe. */
static inline void sp__iom_kick(sp_iomanager_t *io, int worker)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&io->s.workers[worker].idle))
        sp__iom_tickle(io, worker);
}
/* sp_io_wait() with fd's context already looked up (NULL: -EBADF), for
 * the framework's own hot paths; -EPERM outside an IOManager fiber. event
 * is SP_IO_READ or SP_IO_WRITE, exactly one (callers check). */
int sp__io_wait_fd(sp__fd_ctx_t *ctx, int fd, int event, int64_t timeout_us);
/* sp_io_wait in an IOManager fiber, poll(2) on any other thread. */
int sp__io_wait_or_poll(int fd, int event, int64_t timeout_us);
/* sp_io_wait_any with the same answer for an interrupt: the bridge's
 * wait_any. */
int sp__io_hook_wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us);
/* After stop: take every watch of io off its fd and free it. */
void sp__io_forget_all(sp_iomanager_t *io);
/* On the worker's thread: act on everything in its inbox. True if a close
 * among it ran the loop once more (destroy), which may have done work the
 * worker must see before it sleeps. */
bool sp__io_drain_inbox(sp_iomanager_t *io, int worker);
/* On the worker's thread, as it ends: close the inbox and drain it. */
void sp__io_worker_gone(sp_iomanager_t *io, int worker);
/* On a retiring extra worker's thread, with no fiber homed there: stop and
 * free its idle watches; false if one is still armed (it must stay). */
bool sp__io_drop_idle(sp_iomanager_t *io, int worker);

#endif
