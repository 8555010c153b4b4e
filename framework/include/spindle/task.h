/* spindle tasks you can hold: start a function as a fiber and keep a
 * handle to it, to wake, interrupt or join it (sp_fiber_join, sync.h).
 *
 *   sp_fiber_t *f;
 *   sp_task_opts_t o = {.name = "fetch"};
 *   sp_go(sched, fetch, url, &o, &f);
 *   ...
 *   sp_fiber_interrupt(f, ECANCELED);  // its current or next wait fails
 *   int result;
 *   sp_fiber_join(f, SP_FOREVER, &result);
 *   sp_fiber_unref(f);
 *
 * A handle stays valid until its holder releases it with sp_fiber_unref():
 * the fiber object is not freed or reused for another task before then.
 * Calls on a fiber that has finished return -ESRCH and touch nothing else.
 * A fiber pointer without a reference (sp_fiber_current() inside a task
 * started with sp_schedule) is valid only while that task runs; take a
 * reference with sp_fiber_ref() to keep it longer.
 *
 * Deadlines: inside sp_deadline_push(&scope, at) ... sp_deadline_pop(&scope)
 * every wait of the calling fiber ends with -ETIMEDOUT at `at` (hooked
 * libc calls: -1 with errno ETIMEDOUT; the sleep family EINTR), as if
 * interrupted then. Scopes nest (an inner one never extends an outer
 * one); tasks started with sp_go and groups created inside a scope
 * inherit its deadline. On a scheduler without an IOManager a deadline is
 * checked when each wait starts, not during the wait.
 *
 * Interrupts: sp_fiber_interrupt(f, err) ends the wait f is in (fd, sleep,
 * park, mutex, condition, semaphore, channel, group, join,
 * sp_run_blocking) with -err; inside hooked libc calls, -1 with errno =
 * err (EINTR for the sleep family, as POSIX does). An interrupt that
 * arrives while f runs ends its next wait. Interrupts not yet taken by a
 * wait are merged (the last err counts).
 */
#ifndef SPINDLE_TASK_H
#define SPINDLE_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle/fiber.h"
#include "spindle/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A task's function; its return value is the result sp_fiber_join gives. */
typedef int (*sp_task_fn)(void *arg);

typedef struct sp_task_opts {
    const char *name;  /* copied (31 bytes at most); NULL: "task" */
    size_t stack_size; /* 0: SP_FIBER_DEFAULT_STACK */
    bool bound;        /* run only on `worker` (else placed, and may be
                        * stolen before it starts) */
    int worker;        /* with bound: a worker index */
} sp_task_opts_t;

/* Run fn(arg) as a task on its own fiber (opts may be NULL). With out,
 * *out is a handle (one reference, the caller's). 0, -EINVAL (no fn, bad
 * worker), -ESHUTDOWN after stop, -ENOMEM. */
int sp_go(sp_scheduler_t *s, sp_task_fn fn, void *arg,
          const sp_task_opts_t *opts, sp_fiber_t **out);

/* Take or release a reference. sp_fiber_ref needs a fiber the caller
 * knows is alive (a handle it holds, or the fiber it runs in). The last
 * release of a finished fiber frees it. */
void sp_fiber_ref(sp_fiber_t *f);
void sp_fiber_unref(sp_fiber_t *f);

/* End f's current wait (or its next one) with -err (err > 0). Safe from
 * any thread. 0, -EINVAL, -ESRCH (f has finished). */
int sp_fiber_interrupt(sp_fiber_t *f, int err);

/* A deadline scope, on the caller's stack. */
typedef struct sp_deadline {
    uint64_t prev_ns; /* private: the enclosing scope's deadline */
} sp_deadline_t;

/* In a task fiber: waits end with -ETIMEDOUT at abs_ns (sp_now_ns()'s
 * clock) or the enclosing deadline, whichever is first, until the
 * matching sp_deadline_pop. 0, -EINVAL (abs_ns 0), -EPERM outside a task
 * fiber. */
int sp_deadline_push(sp_deadline_t *scope, uint64_t abs_ns);
void sp_deadline_pop(sp_deadline_t *scope);
/* The calling fiber's deadline (abs ns), or 0 for none. */
uint64_t sp_deadline_current(void);

#ifdef __cplusplus
}
#endif

#endif
