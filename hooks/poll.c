/* Calls that wait for fds: poll and select park until one of their fds
 * is ready or the timeout ends, then let the kernel fill in the answer
 * with a zero-timeout call, so the result is exactly what the kernel
 * says. */
#include <errno.h>
#include <poll.h>
#include <string.h>
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

