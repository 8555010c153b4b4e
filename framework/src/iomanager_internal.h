/* Internal: the IOManager object, shared by iomanager.c (workers, loops,
 * timers) and io_event.c (fd events). */
#ifndef SP_IOMANAGER_INTERNAL_H
#define SP_IOMANAGER_INTERNAL_H

#include <ev.h>
#include <stdatomic.h>

#include "fd_table.h"
#include "scheduler_internal.h"
#include "spindle/iomanager.h"
#include "timer_internal.h"

struct sp_io_watch;

typedef struct iom_worker {
    struct ev_loop *loop;
    int pipe_rd, pipe_wr;
    ev_io pipe_io;
    ev_timer wake_timer;
    _Atomic(struct sp_io_watch *) inbox; /* watches for the owner to act on */
    pthread_mutex_t inbox_lock;          /* pushes versus the worker ending */
    bool gone;                           /* the worker has ended: no inbox */
    sp_timer_heap_t timers;
} iom_worker_t;

struct sp_iomanager {
    sp_scheduler_t s; /* first: an IOManager is a scheduler */
    iom_worker_t *w;
    pthread_mutex_t watches_lock;
    struct sp_io_watch *watches; /* every watch, to free them at the end */
};

/* s as an IOManager, or NULL if it is a plain scheduler. */
sp_iomanager_t *sp__iom_of(sp_scheduler_t *s);
/* sp_io_wait() with fd's context already looked up (NULL: -EBADF), for
 * the framework's own hot paths; -EPERM outside an IOManager fiber. */
int sp__io_wait_fd(sp_fd_ctx_t *ctx, int fd, int event, int64_t timeout_us);
/* Wake `worker` if it sleeps, after something was left for it. */
void sp__iom_kick(sp_iomanager_t *io, int worker);
/* After stop: take every watch of io off its fd and free it. */
void sp__io_forget_all(sp_iomanager_t *io);
/* On the worker's thread: act on everything in its inbox. */
void sp__io_drain_inbox(sp_iomanager_t *io, int worker);
/* On the worker's thread, as it ends: close the inbox and drain it. */
void sp__io_worker_gone(sp_iomanager_t *io, int worker);

#endif
