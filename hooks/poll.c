/* Calls that wait for fds: poll and select park until one of their fds
 * is ready or the timeout ends, then let the kernel fill in the answer
 * with a zero-timeout call, so the result is exactly what the kernel
 * says. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "base/clock.h"
#include "hook_internal.h"

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

static uint64_t ms_deadline(int timeout)
{
    return sp__hook_deadline(timeout < 0 ? -1 : (int64_t)timeout * 1000);
}

/* Deadline (0 = none) for a timespec timeout (NULL = none). */
static uint64_t ts_deadline(const struct timespec *ts)
{
    return sp__hook_deadline(ts ? (int64_t)ts->tv_sec * 1000000 + (ts->tv_nsec + 999) / 1000
                                : -1);
}

static bool bad_ts(const struct timespec *ts)
{
    return ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L);
}

/* poll and ppoll: park until the kernel has something to say (a
 * zero-timeout ppoll with the caller's signal mask) or the deadline. */
static int poll_until(const sp__hook_bridge_t *b, struct pollfd *fds, nfds_t n,
                      uint64_t deadline, const sigset_t *mask)
{
    static const struct timespec zero = {0, 0};
    for (;;) {
        int ready = sp__real()->ppoll(fds, n, &zero, mask);
        if (ready != 0 || remaining_ms(deadline) == 0)
            return ready;
        if (wait_fds(b, fds, n, deadline) < 0)
            return -1;
    }
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || timeout == 0)
        return sp__real()->poll(fds, n, timeout);
    return poll_until(b, fds, n, ms_deadline(timeout), NULL);
}

/* The signal mask applies to the kernel's look at the fds, not to the time
 * parked: a fiber's wait is not ended by signals (docs/hooks.md). */
int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || (tmo && tmo->tv_sec == 0 && tmo->tv_nsec == 0) || bad_ts(tmo))
        return sp__real()->ppoll(fds, n, tmo, mask);
    return poll_until(b, fds, n, ts_deadline(tmo), mask);
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo,
                const sigset_t *mask, size_t fdslen)
{
    if (fdslen / sizeof *fds < n)
        __chk_fail();
    return ppoll(fds, n, tmo, mask);
}

/* Copy the sets the caller passed (NULL ones stay NULL on both sides). */
static void copy_sets(fd_set *const dst[3], fd_set *const src[3])
{
    for (int i = 0; i < 3; i++)
        if (dst[i] && src[i])
            *dst[i] = *src[i];
}

/* select and pselect: the sets as poll entries, parked on until the kernel
 * (a zero-timeout pselect with the caller's mask) reports something or the
 * deadline passes. */
static int select_until(const sp__hook_bridge_t *b, int nfds, fd_set *const user[3],
                        uint64_t deadline, const sigset_t *mask)
{
    static const struct timespec zero = {0, 0};
    fd_set want[3];
    fd_set *const mine[3] = {&want[0], &want[1], &want[2]};
    copy_sets(mine, user);
    struct pollfd pfd[FD_SETSIZE];
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = (short)((user[0] && FD_ISSET(fd, user[0]) ? POLLIN : 0) |
                           (user[1] && FD_ISSET(fd, user[1]) ? POLLOUT : 0) |
                           (user[2] && FD_ISSET(fd, user[2]) ? POLLPRI : 0));
        if (ev)
            pfd[n++] = (struct pollfd){.fd = fd, .events = ev};
    }
    for (;;) {
        copy_sets(user, mine);
        int ready = sp__real()->pselect(nfds, user[0], user[1], user[2], &zero, mask);
        if (ready != 0 || remaining_ms(deadline) == 0)
            return ready;
        if (wait_fds(b, pfd, n, deadline) < 0)
            return -1;
    }
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || (tv && tv->tv_sec == 0 && tv->tv_usec == 0) || nfds < 0 ||
        nfds > FD_SETSIZE)
        return sp__real()->select(nfds, rd, wr, ex, tv);
    if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0)) {
        errno = EINVAL;
        return -1;
    }
    uint64_t deadline = sp__hook_deadline(
        tv ? (int64_t)tv->tv_sec * 1000000 + tv->tv_usec : -1);
    fd_set *const user[3] = {rd, wr, ex};
    int ready = select_until(b, nfds, user, deadline, NULL);
    if (ready >= 0 && tv) { /* Linux reports the time not slept */
        uint64_t now = sp__now_ns();
        uint64_t rest = deadline > now ? deadline - now : 0;
        tv->tv_sec = (time_t)(rest / 1000000000u);
        tv->tv_usec = (suseconds_t)(rest % 1000000000u / 1000);
    }
    return ready;
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
            const sigset_t *mask)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || (tmo && tmo->tv_sec == 0 && tmo->tv_nsec == 0) || nfds < 0 ||
        nfds > FD_SETSIZE || bad_ts(tmo))
        return sp__real()->pselect(nfds, rd, wr, ex, tmo, mask);
    fd_set *const user[3] = {rd, wr, ex};
    return select_until(b, nfds, user, ts_deadline(tmo), mask);
}

/* epoll_wait and its kin: an epoll fd is readable while it has events, so
 * park on it like any fd, then take the events with a zero timeout. */
static int epoll_until(const sp__hook_bridge_t *b, int epfd, struct epoll_event *ev,
                       int max, uint64_t deadline, const sigset_t *mask)
{
    struct pollfd pfd = {.fd = epfd, .events = POLLIN};
    for (;;) {
        int n = sp__real()->epoll_pwait(epfd, ev, max, 0, mask);
        if (n != 0 || remaining_ms(deadline) == 0)
            return n;
        if (wait_fds(b, &pfd, 1, deadline) < 0)
            return -1;
    }
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || timeout == 0)
        return sp__real()->epoll_wait(epfd, ev, max, timeout);
    return epoll_until(b, epfd, ev, max, ms_deadline(timeout), NULL);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
                const sigset_t *mask)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || timeout == 0)
        return sp__real()->epoll_pwait(epfd, ev, max, timeout, mask);
    return epoll_until(b, epfd, ev, max, ms_deadline(timeout), mask);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
                 const sigset_t *mask)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b || (tmo && tmo->tv_sec == 0 && tmo->tv_nsec == 0) || bad_ts(tmo))
        return sp__real()->epoll_pwait2(epfd, ev, max, tmo, mask);
    return epoll_until(b, epfd, ev, max, ts_deadline(tmo), mask);
}

