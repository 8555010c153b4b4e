/* The one reader of the monotonic clock (timers, deadlines, the monitor,
 * the supervisor, the hooks' timeouts): nanoseconds since an arbitrary
 * start, never stepped by clock changes. sp_now_ns() (timer.h) is the
 * public face of it. */
#ifndef SP_BASE_CLOCK_H
#define SP_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sp__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef SP_CPU_TICKS
/* base/ticks_<machine>.S: the TSC, or the ARM virtual counter. */
uint64_t sp__cpu_ticks(void);
#endif

/* A cheap timestamp in unspecified units (the counter above where the
 * build has one, else the monotonic clock): a few instructions, stored per
 * wait for dumps. sp__ticks_per_ns() converts it. */
static inline uint64_t sp__ticks(void)
{
#ifdef SP_CPU_TICKS
    return sp__cpu_ticks();
#else
    return sp__now_ns();
#endif
}

#endif
