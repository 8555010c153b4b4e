/* spindle IOManager: the scheduler plus fd readiness and timers.
 *
 * Every worker owns one libev loop. A worker with nothing to run blocks in
 * its loop and wakes for fd readiness, one of its timers, or a tickle
 * written to its pipe. A worker that always has work still polls its loop
 * (without blocking) every few dozen tasks, so I/O and timers never starve.
 *
 * A fiber waiting on an fd is resumed by the worker whose loop watches it:
 * the worker it was running on when it started waiting (or the worker it is
 * bound to). Operations on another worker's loop (a cancel from another
 * thread, a callback event added from outside) go through that worker's
 * mailbox and pipe; no loop is touched by two threads.
 *
 * stop() returns when nothing is left that could still run: no task (queued,
 * running or parked, including fibers waiting on an fd or a timer), no
 * callback event still armed, and no armed timer. A recurring timer keeps the
 * IOManager alive until it is cancelled; so does a callback event on an fd
 * that never becomes ready until it is deleted or cancelled.
 */
#ifndef SPINDLE_IOMANAGER_H
#define SPINDLE_IOMANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "spindle/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_iomanager sp_iomanager_t;

typedef enum sp_io_event { SP_IO_READ = 1, SP_IO_WRITE = 2 } sp_io_event_t;

/* Callback of an fd event, run as a task. result: 0 when the fd is ready,
 * -ECANCELED after sp_io_cancel(), -EBADF when the fd was closed. */
typedef void (*sp_io_fn)(void *arg, int result);

/* Same arguments as sp_scheduler_create. NULL + errno on failure. */
sp_iomanager_t *sp_iomanager_create(const char *name, int threads,
                                    bool use_caller);
int sp_iomanager_start(sp_iomanager_t *io);
/* See the top of this file for what keeps stop() waiting. */
int sp_iomanager_stop(sp_iomanager_t *io);
void sp_iomanager_destroy(sp_iomanager_t *io);
/* The embedded scheduler: use it with sp_schedule() and friends. */
sp_scheduler_t *sp_iomanager_scheduler(sp_iomanager_t *io);

/* What one worker of an IOManager waits on now (as sp_scheduler_stats,
 * worker 0 .. sp_scheduler_threads() - 1 or more with growth). */
typedef struct sp_io_stats {
    uint64_t fd_waits; /* fibers waiting on an fd, homed on this worker */
    uint64_t timers;   /* timers armed on its heap (sleeps, timeouts) */
} sp_io_stats_t;
/* 0 or -EINVAL. */
int sp_iomanager_stats(const sp_iomanager_t *io, int worker, sp_io_stats_t *out);
/* The IOManager of the calling worker thread, or NULL. */
sp_iomanager_t *sp_iomanager_current(void);

/* From a fiber on an IOManager worker: wait until fd is ready for `event`
 * (one of SP_IO_READ, SP_IO_WRITE). timeout_us < 0 waits forever.
 * Returns 0 when ready, -ETIMEDOUT, -ECANCELED (sp_io_cancel), -EBADF (the
 * fd was closed through sp_io_close_fd), -EEXIST if another waiter already
 * waits for the same event on fd, -EPERM outside an IOManager fiber. */
int sp_io_wait(int fd, int event, int64_t timeout_us);

/* One fd and the events (SP_IO_READ | SP_IO_WRITE) a wait wants on it. */
typedef struct sp_io_want {
    int fd;
    int events;
} sp_io_want_t;

#define SP_IO_WAIT_MAX 128

/* Like sp_io_wait, for up to SP_IO_WAIT_MAX fds: returns 0 as soon as any
 * wanted event is ready (the caller then asks the fds which, e.g. with a
 * zero-timeout poll). */
int sp_io_wait_any(const sp_io_want_t *wants, int n, int64_t timeout_us);

/* Arm a one-shot callback event from any thread: fn(arg, result) runs as a
 * task when fd is ready (or the event is cancelled). 0, -EEXIST, -ENOMEM,
 * -ESHUTDOWN, -EINVAL. */
int sp_io_add(sp_iomanager_t *io, int fd, int event, sp_io_fn fn, void *arg);
/* Disarm an event without running anything: a waiting fiber is NOT resumed
 * (it stays parked), a callback does not run. 0 or -ENOENT. */
int sp_io_del(int fd, int event);
/* Fire an event now with -ECANCELED: the waiter resumes, the callback runs.
 * 0 or -ENOENT. Safe from any thread. */
int sp_io_cancel(int fd, int event);
/* Cancel both events of fd. Returns how many were armed. */
int sp_io_cancel_all(int fd);
/* Before closing fd: wake every waiter on it with -EBADF and forget its
 * state, so a later fd with the same number starts clean. */
int sp_io_close_fd(int fd);
/* sp_io_close_fd(fd), then close(2). Use it for fds that fibers waited on:
 * the close hook does the same, but a sanitizer's close interceptor runs
 * before any hook. Returns close's 0 or -errno. */
int sp_io_close(int fd);

#ifdef __cplusplus
}
#endif
#endif
