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

/* A cheap timestamp in unspecified units (the TSC, the ARM virtual counter,
 * else the monotonic clock): a few instructions, stored per wait for dumps.
 * sp__ticks_per_ns() converts it. */
static inline uint64_t sp__ticks(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return sp__now_ns();
#endif
}

#endif
