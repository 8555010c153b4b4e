/* Socket set-up and whole-buffer I/O. */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "spindle/hook.h"
#include "spindle/net.h"

static int fail_close(int fd)
{
    int err = -errno;
    close(fd);
    return err;
}

/* A Unix socket path left behind by a dead server blocks bind: remove it
 * if it is a socket nobody accepts on. */
static void unlink_stale(const sp_addr_t *a)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)&a->ss;
    struct stat st;
    if (stat(un->sun_path, &st) != 0 || !S_ISSOCK(st.st_mode))
        return;
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0)
        return;
    if (connect(probe, (const struct sockaddr *)&a->ss, a->len) < 0 &&
        errno == ECONNREFUSED)
        unlink(un->sun_path);
    close(probe);
}

int sp_listen(const sp_addr_t *a, const sp_listen_opts_t *opts)
{
    int family = a->ss.ss_family;
    if (family == AF_UNIX)
        unlink_stale(a);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC |
                                (opts && opts->nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (family != AF_UNIX) {
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
            return fail_close(fd);
        if (opts && opts->reuseport &&
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
            return fail_close(fd);
    }
    if (family == AF_INET6) /* "[::]" means IPv6 only; IPv4 gets its own */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
        return fail_close(fd);
    int backlog = opts && opts->backlog > 0 ? opts->backlog : SOMAXCONN;
    if (listen(fd, backlog) < 0)
        return fail_close(fd);
    return fd;
}

int sp_connect(const sp_addr_t *a, int64_t timeout_us)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (timeout_us >= 0) {
        /* The hooks take SO_SNDTIMEO as the connect timeout when shorter
         * than their default; the kernel does the same outside fibers. */
        struct timeval tv = {(time_t)(timeout_us / 1000000),
                             (suseconds_t)(timeout_us % 1000000)};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (connect(fd, (const struct sockaddr *)&a->ss, a->len) < 0) {
        int err = errno == EINPROGRESS || errno == EAGAIN ? ETIMEDOUT : errno;
        close(fd);
        return -err;
    }
    if (timeout_us >= 0) { /* the timeout was for connecting only */
        struct timeval none = {0, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    }
    return fd;
}

int sp_set_nodelay(int fd, bool on)
{
    int v = on;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) < 0 ? -errno : 0;
}

/* Whole seconds, rounded up, for the kernel's keepalive options. */
static int seconds_of(int64_t us)
{
    int64_t s = (us + 999999) / 1000000;
    return s > INT_MAX ? INT_MAX : (int)s;
}

int sp_set_keepalive(int fd, bool on, int64_t idle_us, int64_t interval_us, int count)
{
    int idle_s = seconds_of(idle_us), interval_s = seconds_of(interval_us);
    int v = on;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v) < 0)
        return -errno;
    if (!on)
        return 0;
    if ((idle_s > 0 && setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) < 0) ||
        (interval_s > 0 &&
         setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) < 0) ||
        (count > 0 && setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) < 0))
        return -errno;
    return 0;
}

ssize_t sp_read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return got ? (ssize_t)got : -errno;
        }
        got += (size_t)r;
    }
    return (ssize_t)got;
}

ssize_t sp_write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        done += (size_t)w;
    }
    return (ssize_t)n;
}
