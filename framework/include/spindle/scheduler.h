/* spindle N:M scheduler: N worker threads run M fibers.
 *
 * A task is a fiber or a function + argument (run on a pooled fiber). Each
 * worker has a run queue; idle workers steal tasks that have not started yet
 * from busy ones and sleep (0% CPU) when nothing is runnable. A task may be
 * bound to one worker. A fiber that has started always resumes on the worker
 * it last ran on (after a yield, a park or an I/O wait): C code keeps
 * thread-local addresses such as errno's in registers across calls, so
 * moving a running fiber to another thread would be unsafe.
 *
 * With use_caller the creating thread is worker 0: it runs tasks only inside
 * sp_scheduler_stop(). With threads == 1 and use_caller every task runs inside
 * stop(), on the caller's thread, in submission order.
 *
 * stop() returns when every task has finished, including tasks scheduled
 * while stopping and fibers parked waiting for a wake. After it returns,
 * scheduling fails with -ESHUTDOWN.
 */
#ifndef SPINDLE_SCHEDULER_H
#define SPINDLE_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>
#include "spindle/fiber.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_scheduler sp_scheduler_t;

/* Pass as `worker` to let the scheduler place a task. */
#define SP_ANY_WORKER (-1)

/* threads >= 1 (counts the caller when use_caller). NULL + errno on failure
 * (EINVAL, ENOMEM). name may be NULL. */
sp_scheduler_t *sp_scheduler_create(const char *name, int threads,
                                    bool use_caller);
/* Start the worker threads. -EALREADY if started, -errno from pthreads. */
int sp_scheduler_start(sp_scheduler_t *s);
/* Wait for every task to finish, then join the workers. Must be called from
 * the creating thread when use_caller, and never from a worker. Returns
 * -EDEADLK from a worker, -EALREADY if already stopped. */
int sp_scheduler_stop(sp_scheduler_t *s);
/* Free a stopped (or never started) scheduler. */
void sp_scheduler_destroy(sp_scheduler_t *s);

/* Run fn(arg) as a task, on `worker` or SP_ANY_WORKER. Safe from any thread
 * and from inside tasks. -ESHUTDOWN after stop, -EINVAL for a bad worker,
 * -ENOMEM. */
int sp_schedule(sp_scheduler_t *s, sp_fiber_fn fn, void *arg, int worker);
/* Run a READY or SUSPENDED fiber that no one else will resume. The scheduler
 * takes ownership and frees it when it finishes. */
int sp_schedule_fiber(sp_scheduler_t *s, sp_fiber_t *f, int worker);

/* Inside a task: go to the back of the run queue. -EPERM outside a task. */
int sp_yield(void);
/* Inside a task: sleep until sp_wake(). A wake that comes before the park
 * (even before park is called, or while the fiber waits on anything else:
 * a sleep, an fd, a mutex...) is kept, so the park returns at once; wakes
 * before the park returns are merged. 0, -EPERM outside a task, or -err
 * when interrupted (sp_fiber_interrupt, task.h). */
int sp_park(void);
/* Make a parked fiber runnable again, on the worker it last ran on (or
 * leave the wake for its next sp_park). Safe from any thread. 0, -EINVAL
 * for a fiber not owned by a scheduler, -ESRCH for one that has finished
 * (a handle: task.h). */
int sp_wake(sp_fiber_t *f);

/* Run fn(arg), a call that may block (a blocking library, DNS, disk), on a
 * small pool of helper threads while the calling fiber parks; its worker
 * keeps running other fibers. Outside a task fiber, runs fn(arg) inline.
 * Returns 0, or -ENOMEM / -EAGAIN when no helper could be had (then fn
 * has not run), or -err when sp_fiber_interrupt(f, err) ended the wait
 * (task.h): the fiber goes on at once and fn still runs to its end on the
 * helper, so arg must outlive it. */
int sp_run_blocking(void (*fn)(void *), void *arg);

/* The helper pool: jobs run to their end (abandoned: of those, the ones
 * whose fiber had been interrupted), jobs waiting for a helper, helper
 * threads and how many of them are idle. 0 or -EINVAL. */
typedef struct sp_blocking_stats {
    uint64_t jobs, abandoned, queued;
    unsigned threads, idle;
} sp_blocking_stats_t;
int sp_blocking_stats(sp_blocking_stats_t *out);

/* The scheduler of the calling worker thread, or NULL. */
sp_scheduler_t *sp_scheduler_current(void);
/* Index of the calling worker (0 .. threads-1), or -1. */
int sp_worker_index(void);
int sp_scheduler_threads(const sp_scheduler_t *s);
const char *sp_scheduler_name(const sp_scheduler_t *s);

/* ---- placement of SP_ANY_WORKER tasks ---------------------------------- */

typedef enum sp_dispatch {
    /* From a worker: its own queue (cache-warm; idle workers steal the
     * excess). From other threads: round-robin. The default. */
    SP_DISPATCH_LOCAL_FIRST,
    /* Every submission goes to the next worker in turn, from anywhere. */
    SP_DISPATCH_ROUND_ROBIN,
    /* The worker with the fewest queued tasks (an idle one first). */
    SP_DISPATCH_LEAST_LOADED
} sp_dispatch_t;

/* Choose how SP_ANY_WORKER tasks are placed. Before sp_scheduler_start():
 * 0, -EINVAL (unknown strategy), -EBUSY (already started). Every strategy
 * skips workers the monitor flagged as stuck. */
int sp_scheduler_set_dispatch(sp_scheduler_t *s, sp_dispatch_t d);

/* ---- blocking-code monitor ----------------------------------------------- */

/* A suggested stall_us: long enough that a busy task is not blamed. */
#define SP_MONITOR_DEFAULT_STALL_US 100000

typedef struct sp_monitor_opts {
    /* Report a worker that ran one fiber without switching for this long
     * (a CPU-bound loop, a call the hooks do not cover). > 0. The monitor
     * thread wakes every stall_us / 2 while it runs. */
    int64_t stall_us;
    /* Also let other workers take the stuck worker's queued fibers that
     * already started (tasks that never ran are always taken). Off by
     * default: a moved fiber resumes on another thread, and code that kept
     * a thread-local address across a switch (errno's included: glibc's
     * __errno_location is a const function) would touch the stuck thread's
     * variable. Turn it on only for fibers that re-read thread-locals after
     * every switch (docs/guide.md, "Blocking code"). */
    bool migrate_stuck;
    /* Grow to at most this many workers while workers are stuck (an
     * IOManager too: an extra worker gets its own loop and timer heap).
     * 0 or `threads`: never. <= 1024. */
    int max_threads;
    /* Ask an extra worker to retire after no worker was stuck for this
     * long. 0: 10 * stall_us. It leaves once no fiber is queued or homed
     * there and, in an IOManager, no timer is armed on its heap and no
     * watch it owns is armed (docs/guide.md, "Growth on an IOManager"). */
    int64_t shrink_after_us;
} sp_monitor_opts_t;

/* Turn the monitor on (off by default). Before sp_scheduler_start();
 * growth beyond `threads` must also come before anything is scheduled
 * (the worker slots are reallocated). Stalls are logged at WARN on the
 * logger "spindle.monitor" (the root logger writes to stderr until
 * configured): "worker W stuck for N ms in fiber ID (NAME)". 0, -EINVAL,
 * -EBUSY (started, or tasks already queued when growing), -ENOMEM. */
int sp_scheduler_set_monitor(sp_scheduler_t *s, const sp_monitor_opts_t *o);

typedef struct sp_monitor_stats {
    uint64_t stalls;   /* stuck episodes reported */
    uint64_t rescued;  /* never-started tasks taken from stuck workers */
    uint64_t migrated; /* started fibers taken from stuck workers */
    uint64_t grown;    /* extra workers started */
    uint64_t shrunk;   /* extra workers retired */
    int threads;       /* workers now (base + extra) */
} sp_monitor_stats_t;

int sp_scheduler_monitor_stats(const sp_scheduler_t *s,
                               sp_monitor_stats_t *out);

typedef struct sp_worker_stats {
    uint64_t tasks_run; /* tasks that finished on this worker */
    uint64_t switches;  /* switches into task fibers */
    uint64_t steals;    /* tasks taken from another worker's queue */
    uint64_t polls;     /* event polls: waits for work, and busy ticks */
    uint64_t idle_us;   /* time blocked waiting for work */
    uint64_t queued;    /* tasks in its shared and bound queues now */
    uint64_t fibers;    /* started task fibers living here now: running,
                           queued again or parked (waiting) */
} sp_worker_stats_t;

/* Counters of one worker (0 .. max_threads-1 with growth); exact once the
 * scheduler is stopped. */
int sp_scheduler_stats(const sp_scheduler_t *s, int worker,
                       sp_worker_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
