/* The sync tests' shared helpers (tests/sync/test_sync_*.c): an IOManager
 * to run fibers on, and the time in microseconds. */
#ifndef SP_SYNC_UTIL_H
#define SP_SYNC_UTIL_H

#include <check.h>
#include <stdint.h>

#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/sync.h>
#include <spindle/timer.h>

static inline uint64_t now_us(void)
{
    return sp_now_ns() / 1000;
}

/* An IOManager (timers) or a plain scheduler with `threads` workers. */
static inline sp_iomanager_t *io_new(int threads)
{
    sp_iomanager_t *io = sp_iomanager_create("sync", threads, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    return io;
}

static inline void io_end(sp_iomanager_t *io)
{
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

static inline void go(sp_iomanager_t *io, sp_fiber_fn fn, void *arg, int worker)
{
    ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), fn, arg, worker),
                     0);
}

/* A fiber that posts the semaphore arg: on one worker fibers run in
 * submission order, so it runs once those scheduled before it parked. */
static inline void marker(void *arg)
{
    sp_sem_post(arg);
}

#endif
