/* Shared by the task tests (test_task.c, test_interrupt.c): starting a
 * task with a handle on an IOManager (sync_util.h's), and joining it. */
#ifndef SP_TASK_UTIL_H
#define SP_TASK_UTIL_H

#include <check.h>

#include <spindle/iomanager.h>
#include <spindle/sync.h>
#include <spindle/task.h>

#include "sync/sync_util.h" /* io_new, io_end */

/* A bound on every wait for an event that must come. */
#define BOUND_US 5000000

/* fn(arg) as a task bound to `worker` (or placed, for -1); its handle. */
static inline sp_fiber_t *go_on(sp_iomanager_t *io, sp_task_fn fn, void *arg, int worker)
{
    sp_fiber_t *f = NULL;
    sp_task_opts_t o = {.bound = worker >= 0, .worker = worker};
    ck_assert_int_eq(sp_go(sp_iomanager_scheduler(io), fn, arg, &o, &f), 0);
    return f;
}

/* Join f within bound_us and release it; its result. */
static inline int join_within(sp_fiber_t *f, int64_t bound_us)
{
    int result = -1;
    ck_assert_int_eq(sp_fiber_join(f, bound_us, &result), 0);
    sp_fiber_unref(f);
    return result;
}

static inline int join(sp_fiber_t *f)
{
    return join_within(f, BOUND_US);
}

#endif
