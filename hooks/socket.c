/* Sockets and descriptors: creation (non-blocking underneath, blocking as
 * the user sees it), connect with a timeout, accept, close and dup that
 * wake waiters and keep the fd table right, and the flag calls (fcntl,
 * ioctl FIONBIO) that show and change the user's view. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hook_internal.h"
#include "spindle/iomanager.h"

int socket(int domain, int type, int protocol)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->socket(domain, type, protocol);
    int fd = sp__real()->socket(domain, type | SOCK_NONBLOCK, protocol);
    if (fd >= 0)
        sp__hook_adopt(b, fd, (type & 0xf) == SOCK_STREAM, type & SOCK_NONBLOCK);
    return fd;
}

static int64_t min_timeout(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = NULL;
    sp__fd_ctx_t *ctx = sp__hook_managed(fd, &b, NULL);
    if (!ctx)
        return r->connect(fd, addr, len);
    uint64_t deadline = sp__hook_deadline(min_timeout(
        b->connect_timeout(), b->fd_timeout(ctx, false)));
    for (;;) {
        if (r->connect(fd, addr, len) == 0)
            return 0;
        if (errno == EINPROGRESS)
            break;
        if (errno != EAGAIN) /* AF_UNIX with a full backlog says EAGAIN */
            return -1;
        if (b->sleep_us(1000) < 0 ||
            (deadline && sp__hook_deadline(0) >= deadline)) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
    if (sp__hook_wait(b, ctx, fd, SP_IO_WRITE, &deadline) < 0) {
        if (errno == EAGAIN)
            errno = ETIMEDOUT;
        return -1;
    }
    int err = 0;
    socklen_t elen = sizeof err;
    if (r->getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
        return -1;
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = NULL;
    sp__fd_ctx_t *ctx = sp__hook_managed(fd, &b, NULL);
    if (!ctx)
        return r->accept4(fd, addr, len, flags);
    uint64_t deadline = SP_HOOK_FD_DEADLINE;
    for (;;) {
        int nfd = r->accept4(fd, addr, len, flags | SOCK_NONBLOCK);
        if (nfd >= 0) {
            sp__hook_adopt(b, nfd, true, flags & SOCK_NONBLOCK); /* accept: streams */
            return nfd;
        }
        if (errno != EAGAIN)
            return -1;
        if (sp__hook_wait(b, ctx, fd, SP_IO_READ, &deadline) < 0)
            return -1;
    }
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    if (!sp__hook_active())
        return sp__real()->accept(fd, addr, len);
    return accept4(fd, addr, len, 0);
}

/* The fd number is going away: wake its waiters with EBADF and forget it.
 * Done on every thread, hooks on or off, so a reused number starts clean. */
static void forget_fd(int fd)
{
    const sp__hook_bridge_t *b = sp__bridge();
    if (b)
        b->close_fd(fd);
}

int close(int fd)
{
    forget_fd(fd);
    return sp__real()->close(fd);
}

/* newfd now shares oldfd's open file: copy what we know about it. */
static void copy_fd(int oldfd, int newfd)
{
    const sp__hook_bridge_t *b = sp__bridge();
    sp__fd_ctx_t *from = b ? b->fd_ctx(oldfd) : NULL;
    sp__fd_ctx_t *to = b ? b->fd_ctx(newfd) : NULL;
    if (!from || !to || from == to)
        return;
    b->fd_copy(to, from, b->fd_ctx_load(from, oldfd));
}

int dup(int oldfd)
{
    int fd = sp__real()->dup(oldfd);
    if (fd >= 0) {
        forget_fd(fd);
        copy_fd(oldfd, fd);
    }
    return fd;
}

int dup2(int oldfd, int newfd)
{
    if (oldfd != newfd)
        forget_fd(newfd); /* dup2 closes newfd: its waiters get EBADF */
    int fd = sp__real()->dup2(oldfd, newfd);
    if (fd >= 0 && oldfd != newfd)
        copy_fd(oldfd, fd);
    return fd;
}

int dup3(int oldfd, int newfd, int flags)
{
    if (oldfd != newfd)
        forget_fd(newfd);
    int fd = sp__real()->dup3(oldfd, newfd, flags);
    if (fd >= 0)
        copy_fd(oldfd, fd);
    return fd;
}

/* The fd's context when we keep O_NONBLOCK set for it behind the user's
 * back (its flags in *flags, if not NULL); only then do flags need translating. */
static sp__fd_ctx_t *managed_nb(int fd, unsigned *flags)
{
    const sp__hook_bridge_t *b = sp__bridge();
    sp__fd_ctx_t *c = b ? b->fd_ctx(fd) : NULL;
    if (!c)
        return NULL;
    unsigned fl = b->fd_flags(c);
    if (flags)
        *flags = fl;
    return (fl & SP_FD_VALID) && (fl & SP_FD_MANAGED) && (fl & SP_FD_SYS_NB) ? c : NULL;
}

/* fcntl and fcntl64 (what fcntl is under -D_FILE_OFFSET_BITS=64; the same
 * call on 64-bit systems). Ends ap. */
static int hooked_fcntl(int fd, int cmd, va_list ap)
{
    const sp__real_t *r = sp__real();
    int ret;
    switch (cmd) {
    case F_GETFL: {
        va_end(ap);
        ret = r->fcntl(fd, cmd);
        unsigned fl = 0;
        sp__fd_ctx_t *c = ret >= 0 ? managed_nb(fd, &fl) : NULL;
        if (c && !(fl & SP_FD_USER_NB))
            ret &= ~O_NONBLOCK;
        return ret;
    }
    case F_SETFL: {
        int fl = va_arg(ap, int);
        va_end(ap);
        sp__fd_ctx_t *c = managed_nb(fd, NULL);
        ret = r->fcntl(fd, cmd, c ? fl | O_NONBLOCK : fl);
        if (ret == 0 && c)
            sp__bridge()->fd_set_user_nb(c, fl & O_NONBLOCK);
        return ret;
    }
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
        int min = va_arg(ap, int);
        va_end(ap);
        ret = r->fcntl(fd, cmd, min);
        if (ret >= 0) {
            forget_fd(ret);
            copy_fd(fd, ret);
        }
        return ret;
    }
    case F_GETFD:
    case F_GETOWN:
    case F_GETSIG:
    case F_GETLEASE:
    case F_GETPIPE_SZ:
    case F_GET_SEALS:
        va_end(ap);
        return r->fcntl(fd, cmd);
    case F_SETFD:
    case F_SETOWN:
    case F_SETSIG:
    case F_SETLEASE:
    case F_NOTIFY:
    case F_SETPIPE_SZ:
    case F_ADD_SEALS: {
        int v = va_arg(ap, int);
        va_end(ap);
        return r->fcntl(fd, cmd, v);
    }
    default: { /* the rest take a pointer (locks, owner_ex, hints) */
        void *p = va_arg(ap, void *);
        va_end(ap);
        return r->fcntl(fd, cmd, p);
    }
    }
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    return hooked_fcntl(fd, cmd, ap);
}

int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    return hooked_fcntl(fd, cmd, ap);
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    sp__fd_ctx_t *c = request == FIONBIO ? managed_nb(fd, NULL) : NULL;
    if (c && arg) {
        /* Keep the kernel side non-blocking; record what the user wants
         * (sylar made the socket really blocking here and stalled the
         * worker). */
        sp__bridge()->fd_set_user_nb(c, *(int *)arg != 0);
        return 0;
    }
    return sp__real()->ioctl(fd, request, arg);
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    return sp__real()->getsockopt(fd, level, name, val, len);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    int ret = sp__real()->setsockopt(fd, level, name, val, len);
    const sp__hook_bridge_t *b = sp__bridge();
    if (ret == 0 && b && level == SOL_SOCKET &&
        (name == SO_RCVTIMEO || name == SO_SNDTIMEO) &&
        len >= sizeof(struct timeval)) {
        /* The kernel keeps the value for getsockopt; we keep it as the
         * timeout of hooked waits (0 means none, as for the kernel). */
        const struct timeval *tv = val;
        int64_t us = (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
        sp__fd_ctx_t *c = b->fd_ctx(fd);
        if (c)
            b->fd_set_timeout(c, name == SO_RCVTIMEO, us);
    }
    return ret;
}
