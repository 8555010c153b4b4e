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

#endif
