/* The sleep family: sleep, usleep, nanosleep, clock_nanosleep and
 * thrd_sleep park the fiber on a timer. */
#include <errno.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "hook_internal.h"

/* Park for ns, rounded up to the microsecond: a sleep never ends early
 * (sylar turned usleep(500) into a 0 ms timer). 0 or a negative errno. A
 * fiber's sleep is not cut short by signals; an interrupt or a deadline
 * (task.h) cuts it short as a signal would a thread's. */
static int park_ns(const sp__hook_bridge_t *b, uint64_t ns)
{
    return b->sleep_us((ns + 999) / 1000);
}

/* A relative sleep: 0, or the errno value the call reports: EINTR when
 * cut short, with the time left in *rem (if not NULL), as POSIX says. */
static int sleep_rel(const sp__hook_bridge_t *b, uint64_t ns, struct timespec *rem)
{
    uint64_t end = sp__now_ns() + ns;
    int rc = park_ns(b, ns);
    if (rc == 0)
        return 0;
    if (rc == -ENOMEM)
        return ENOMEM;
    if (rem) {
        uint64_t now = sp__now_ns(), left = end > now ? end - now : 0;
        rem->tv_sec = (time_t)(left / 1000000000u);
        rem->tv_nsec = (long)(left % 1000000000u);
    }
    return EINTR;
}

/* A libc-style failure: -1 with errno = err. */
static int fail(int err)
{
    errno = err;
    return -1;
}

static bool valid_ts(const struct timespec *ts)
{
    return ts && ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L;
}

static uint64_t ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

unsigned sleep(unsigned seconds)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->sleep(seconds);
    struct timespec rem = {0, 0};
    if (sleep_rel(b, (uint64_t)seconds * 1000000000u, &rem) == 0)
        return 0;
    return (unsigned)rem.tv_sec + (rem.tv_nsec > 0); /* seconds not slept */
}

int usleep(useconds_t usec)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->usleep(usec);
    int err = sleep_rel(b, (uint64_t)usec * 1000, NULL);
    return err ? fail(err) : 0;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->nanosleep(req, rem);
    if (!valid_ts(req))
        return fail(EINVAL);
    int err = sleep_rel(b, ts_ns(req), rem);
    return err ? fail(err) : 0;
}

/* Until `clock` reads `at` or later. The timers run on the monotonic
 * clock: a wall clock set back meanwhile is found still short when the
 * timer ends, and slept again. */
static int sleep_until(const sp__hook_bridge_t *b, clockid_t clock,
                       const struct timespec *at)
{
    for (;;) {
        struct timespec now;
        clock_gettime(clock, &now);
        uint64_t t = ts_ns(&now), end = ts_ns(at);
        if (t >= end)
            return 0;
        int rc = park_ns(b, end - t);
        if (rc < 0)
            return rc == -ENOMEM ? ENOMEM : EINTR;
    }
}

/* POSIX: the error number is the result (errno is left alone). Monotonic
 * and wall-clock sleeps park; other clocks (CPU time, boot time) are the
 * kernel's. */
int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                    struct timespec *rem)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME))
        return sp__real()->clock_nanosleep(clock, flags, req, rem);
    if (!valid_ts(req))
        return EINVAL;
    if (flags & TIMER_ABSTIME)
        return sleep_until(b, clock, req);
    return sleep_rel(b, ts_ns(req), rem);
}

/* C11: 0, -1 when a signal interrupted it, another negative value on an
 * error; a relative sleep on the wall clock, as glibc's. */
int thrd_sleep(const struct timespec *duration, struct timespec *remaining)
{
    int rc = clock_nanosleep(CLOCK_REALTIME, 0, duration, remaining);
    return rc == 0 ? 0 : rc == EINTR ? -1 : -2;
}

