/* Calls that only wait: the sleep family parks on a timer; poll and select
 * park until one of their fds is ready or the timeout ends, then let the
 * kernel fill in the answer with a zero-timeout call, so the result is
 * exactly what the kernel says; getaddrinfo runs on a helper thread. */
#include <errno.h>
#include <string.h>
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
    struct timespec rem;
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

static int remaining_ms(uint64_t deadline)
{
    if (!deadline)
        return -1;
    uint64_t now = sp__now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Park until one of fds is ready or the deadline passes. 0, or -1 + errno
 * for a failure the caller should report. */
static int wait_fds(const sp__hook_bridge_t *b, const struct pollfd *fds,
                    nfds_t n, uint64_t deadline)
{
    sp_io_want_t wants[SP_IO_WAIT_MAX];
    int k = 0;
    for (nfds_t i = 0; i < n && k < SP_IO_WAIT_MAX; i++) {
        int ev = 0;
        if (fds[i].events & (POLLIN | POLLPRI | POLLRDHUP))
            ev |= SP_IO_READ;
        if (fds[i].events & POLLOUT)
            ev |= SP_IO_WRITE;
        if (fds[i].fd >= 0 && ev)
            wants[k++] = (sp_io_want_t){fds[i].fd, ev};
    }
    /* More fds than one wait can watch: look again every millisecond. */
    int64_t timeout_us = n > SP_IO_WAIT_MAX ? 1000 : -1;
    if (deadline) {
        uint64_t now = sp__now_ns();
        int64_t left = now >= deadline ? 0 : (int64_t)((deadline - now + 999) / 1000);
        if (timeout_us < 0 || left < timeout_us)
            timeout_us = left;
    }
    int rc = k ? b->wait_any(wants, k, timeout_us) : -EEXIST;
    if (rc == -EEXIST) { /* nothing to watch (a sleep), or another fiber
                          * waits on one of them: look again after a while */
        int slept = b->sleep_us(k ? 1000 : (uint64_t)timeout_us);
        rc = slept < 0 ? slept - SP_HOOK_INTERRUPTED : 0; /* only cut short */
    }
    if (rc <= -SP_HOOK_INTERRUPTED) /* an interrupt or a deadline: its errno */
        rc += SP_HOOK_INTERRUPTED;
    else if (rc == -ETIMEDOUT || rc == -ECANCELED || rc == -EBADF)
        return 0; /* look again: the kernel says what is ready */
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

/* The fortified poll (hook_internal.h): fds must hold n entries. */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
    if (fdslen / sizeof *fds < n)
        __chk_fail();
    return poll(fds, n, timeout);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || timeout == 0)
        return r->poll(fds, n, timeout);
    uint64_t deadline = sp__hook_deadline(timeout < 0 ? -1 : (int64_t)timeout * 1000);
    for (;;) {
        int ready = r->poll(fds, n, 0);
        if (ready != 0 || remaining_ms(deadline) == 0)
            return ready;
        if (wait_fds(b, fds, n, deadline) < 0)
            return -1;
    }
}

/* Copy the sets the caller passed (NULL ones stay NULL on both sides). */
static void copy_sets(fd_set *const dst[3], fd_set *const src[3])
{
    for (int i = 0; i < 3; i++)
        if (dst[i] && src[i])
            *dst[i] = *src[i];
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || (tv && tv->tv_sec == 0 && tv->tv_usec == 0) || nfds < 0 ||
        nfds > FD_SETSIZE)
        return r->select(nfds, rd, wr, ex, tv);
    if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0)) {
        errno = EINVAL;
        return -1;
    }
    uint64_t deadline = sp__hook_deadline(
        tv ? (int64_t)tv->tv_sec * 1000000 + tv->tv_usec : -1);
    fd_set want[3];
    fd_set *const user[3] = {rd, wr, ex};
    fd_set *const mine[3] = {&want[0], &want[1], &want[2]};
    copy_sets(mine, user);
    struct pollfd pfd[FD_SETSIZE];
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
                           (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
                           (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
        if (ev)
            pfd[n++] = (struct pollfd){.fd = fd, .events = ev};
    }
    for (;;) {
        struct timeval zero = {0, 0};
        copy_sets(user, mine);
        int ready = r->select(nfds, rd, wr, ex, &zero);
        int left = remaining_ms(deadline);
        if (ready != 0 || left == 0) {
            if (tv) { /* Linux reports the time not slept */
                uint64_t now = sp__now_ns();
                uint64_t rest = deadline > now ? deadline - now : 0;
                tv->tv_sec = (time_t)(rest / 1000000000u);
                tv->tv_usec = (suseconds_t)(rest % 1000000000u / 1000);
            }
            return ready;
        }
        if (wait_fds(b, pfd, n, deadline) < 0)
            return -1;
    }
}

typedef struct gai_call {
    const char *node, *service;
    const struct addrinfo *hints;
    struct addrinfo **res;
    int ret;
    int err;
} gai_call_t;

static void run_gai(void *p)
{
    gai_call_t *c = p;
    c->ret = sp__real()->getaddrinfo(c->node, c->service, c->hints, c->res);
    c->err = errno;
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->getaddrinfo(node, service, hints, res);
    /* On a helper thread: resolver state is per thread there, and a slow
     * DNS answer never stalls this worker. */
    gai_call_t c = {node, service, hints, res, EAI_SYSTEM, 0};
    int rc = b->run_blocking(run_gai, &c);
    if (rc < 0) {
        errno = -rc;
        return EAI_SYSTEM;
    }
    errno = c.err;
    return c.ret;
}
