/* Shared by the hook tests that need one worker: a call that blocked the
 * thread instead of parking its fiber would keep the second fiber from
 * running. */
#ifndef SP_HOOK_UTIL_H
#define SP_HOOK_UTIL_H

#include <check.h>
#include <stdint.h>

#include <spindle/iomanager.h>
#include <spindle/scheduler.h>

/* A fiber that does nothing: the second of run_on_one_worker when only
 * the first matters. */
static inline void hook_nothing(void *arg)
{
    (void)arg;
}

/* Jobs the helper pool has run so far (sp_blocking_stats): a call that
 * went to a helper moves it by one per job. */
static inline uint64_t helper_jobs(void)
{
    sp_blocking_stats_t st;
    ck_assert_int_eq(sp_blocking_stats(&st), 0);
    return st.jobs;
}

/* Run first, then second, as fibers on a one-worker IOManager; return
 * once both (and whatever they started) have finished. */
static inline void run_on_one_worker(sp_fiber_fn first, sp_fiber_fn second)
{
    sp_iomanager_t *io = sp_iomanager_create("hooks", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    ck_assert_int_eq(sp_schedule(s, first, NULL, 0), 0);
    ck_assert_int_eq(sp_schedule(s, second, NULL, 0), 0);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

#endif
