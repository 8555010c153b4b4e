/* read/write family: try the call first (one syscall when the fd is
 * ready), park on EAGAIN, retry when woken. SO_RCVTIMEO / SO_SNDTIMEO bound
 * the whole call and end it with EAGAIN, as the kernel does. The write
 * loop (every byte sent, as on a blocking socket) is in io_write.c. */
#include <errno.h>

#include "io_call.h"
#include "spindle/iomanager.h"

static size_t read_size(const io_call_t *c)
{
    switch (c->op) {
    case OP_READV: return iov_total(c->iov, c->iovcnt);
    case OP_RECVMSG: return iov_total(c->msg->msg_iov, (int)c->msg->msg_iovlen);
    default: return c->len;
    }
}

/* A read on a stream socket that returned less than asked for emptied the
 * socket's receive queue at that moment. The next read then waits for
 * readiness first (SP_FD_DRAINED; the wait consumes the hint) instead of
 * paying for a read that would say EAGAIN: in a request/response loop that
 * is one syscall fewer per message. The watch is level-triggered, so data
 * that came meanwhile wakes the wait at once. */
static void note_read(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, unsigned fl,
                      const io_call_t *c, ssize_t n)
{
    if (n > 0 && (fl & SP_FD_STREAM) && !(c->flags & MSG_PEEK) &&
        (size_t)n < read_size(c))
        sp__bridge_set_drained(b, ctx);
}

/* read/write on a stream socket go to the kernel as recv/send with no
 * flags, which the man pages define as the same call (SIGPIPE included):
 * they skip the VFS layer's per-call checks (rw_verify_area, the file
 * permission hook, fsnotify), so a write+read pair over loopback TCP takes
 * less time (bench/peers.sh echo). Not for datagram sockets, where
 * read and recv differ on an empty datagram. */
static void as_socket_call(io_call_t *c, unsigned fl)
{
    if (c->op != OP_READ && c->op != OP_WRITE)
        return;
    if (!(fl & SP_FD_STREAM))
        return;
    c->op = c->op == OP_READ ? OP_RECV : OP_SEND;
    c->flags = 0;
}

/* The read family on a managed socket whose flags the call's lookup read
 * (fl): after the kernel call the fd's entry is likely cold again, so it
 * is not read a second time. */
static ssize_t hooked_read(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, unsigned fl,
                           io_call_t *c)
{
    uint64_t deadline = SP_HOOK_FD_DEADLINE;
    if ((fl & SP_FD_DRAINED) && sp__hook_wait(b, ctx, c->fd, SP_IO_READ, &deadline) < 0)
        return -1;
    for (;;) {
        ssize_t n = call_libc(c);
        if (n >= 0 || errno != EAGAIN) {
            note_read(b, ctx, fl, c, n);
            return n;
        }
        if (sp__hook_wait(b, ctx, c->fd, SP_IO_READ, &deadline) < 0)
            return -1;
    }
}

/* A call whose fd has been looked up (ctx NULL: not one to park on). */
static ssize_t dispatch(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, unsigned fl,
                        io_call_t *c)
{
    if (!ctx)
        return fl & SP_FD_FILE ? sp__hook_file_io(b, fl, c) : call_libc(c);
    as_socket_call(c, fl);
    if (c->op <= OP_RECVMSG)
        return hooked_read(b, ctx, fl, c);
    return sp__hook_write(b, ctx, c, call_libc(c));
}

static ssize_t hooked(io_call_t *c)
{
    const sp__hook_bridge_t *b = NULL;
    unsigned fl = 0;
    sp__fd_ctx_t *ctx =
        c->flags & MSG_DONTWAIT ? NULL : sp__hook_managed(c->fd, &b, &fl);
    return dispatch(b, ctx, fl, c);
}

/* dispatch() for a call with one buffer, off the fast paths below: its
 * call record is in a frame of its own (external, so not inlined into
 * theirs), and the frame a fiber parked in stream_call keeps is a cache
 * line smaller. */
ssize_t sp__hook_dispatch_buf(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, unsigned fl,
                              io_op_t op, int fd, const void *buf, size_t len)
{
    return dispatch(b, ctx, fl, &(io_call_t){.op = op, .fd = fd, .cbuf = buf, .len = len});
}

/* read or write, recv or send with no flags, on a managed stream socket
 * (the loop of every request/response server), in one function whose
 * first step is the fd's lookup, inline. A read takes hooked_read's steps
 * as a recv with no flags (as_socket_call), without a dispatch on the
 * call's kind at each step; a write is a send that takes every byte, the
 * rest of its loop is sp__hook_write's (buf is written only by a read).
 * Anything else goes as hooked() does. */
static ssize_t stream_call(int fd, void *buf, size_t len, io_op_t op)
{
    const sp__hook_bridge_t *b;
    unsigned fl = 0;
    bool writing = op == OP_WRITE || op == OP_SEND;
    sp__fd_ctx_t *ctx = sp__hook_lookup(fd, !writing, &b, &fl);
    if (!ctx || !(fl & SP_FD_STREAM))
        return sp__hook_dispatch_buf(b, ctx, fl, op, fd, buf, len);
    if (writing) {
        ssize_t n = sp__real()->send(fd, buf, len, 0);
        if (n >= 0 && (size_t)n == len)
            return n;
        return sp__hook_write(b, ctx,
                              &(io_call_t){.op = OP_SEND, .fd = fd, .cbuf = buf, .len = len}, n);
    }
    uint64_t deadline = SP_HOOK_FD_DEADLINE;
    if ((fl & SP_FD_DRAINED) && sp__hook_wait(b, ctx, fd, SP_IO_READ, &deadline) < 0)
        return -1;
    for (;;) {
        ssize_t n = sp__real()->recv(fd, buf, len, 0);
        if (n > 0 && (size_t)n < len)
            sp__bridge_set_drained(b, ctx); /* as note_read */
        if (n >= 0 || errno != EAGAIN)
            return n;
        if (sp__hook_wait(b, ctx, fd, SP_IO_READ, &deadline) < 0)
            return -1;
    }
}

ssize_t read(int fd, void *buf, size_t len)
{
    return stream_call(fd, buf, len, OP_READ);
}

ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    return hooked(&(io_call_t){.op = OP_READV, .fd = fd, .iov = iov, .iovcnt = iovcnt});
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    if (!flags)
        return stream_call(fd, buf, len, OP_RECV);
    if (flags & MSG_DONTWAIT) /* never parks: libc's call, as hooked() makes it */
        return sp__real()->recv(fd, buf, len, flags);
    return hooked(&(io_call_t){.op = OP_RECV, .fd = fd, .buf = buf, .len = len,
                               .flags = flags});
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
                 struct sockaddr *addr, socklen_t *addrlen)
{
    return hooked(&(io_call_t){.op = OP_RECVFROM, .fd = fd, .buf = buf, .len = len,
                               .flags = flags, .addr = addr, .addrlen = addrlen});
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    return hooked(&(io_call_t){.op = OP_RECVMSG, .fd = fd, .msg = msg, .flags = flags});
}

ssize_t write(int fd, const void *buf, size_t len)
{
    return stream_call(fd, (void *)buf, len, OP_WRITE);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    return hooked(&(io_call_t){.op = OP_WRITEV, .fd = fd, .iov = iov, .iovcnt = iovcnt});
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    if (!flags)
        return stream_call(fd, (void *)buf, len, OP_SEND);
    if (flags & MSG_DONTWAIT)
        return sp__real()->send(fd, buf, len, flags);
    return hooked(&(io_call_t){.op = OP_SEND, .fd = fd, .cbuf = buf, .len = len,
                               .flags = flags});
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
               const struct sockaddr *addr, socklen_t addrlen)
{
    return hooked(&(io_call_t){.op = OP_SENDTO, .fd = fd, .cbuf = buf, .len = len,
                               .flags = flags, .caddr = addr, .caddrlen = addrlen});
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    return hooked(&(io_call_t){.op = OP_SENDMSG, .fd = fd, .cmsg = msg, .flags = flags});
}

/* The fortified entry points (hook_internal.h). */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
    if (len > buflen)
        __chk_fail();
    return read(fd, buf, len);
}

ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
    if (len > buflen)
        __chk_fail();
    return recv(fd, buf, len, flags);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *addrlen)
{
    if (len > buflen)
        __chk_fail();
    return recvfrom(fd, buf, len, flags, addr, addrlen);
}
