/* Internal to the hook layer: one hooked read/write-family call, as its
 * arguments and the libc function behind it. */
#ifndef SP_HOOK_IO_CALL_H
#define SP_HOOK_IO_CALL_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "hook_internal.h"

typedef enum {
    OP_READ, OP_READV, OP_RECV, OP_RECVFROM, OP_RECVMSG,
    OP_WRITE, OP_WRITEV, OP_SEND, OP_SENDTO, OP_SENDMSG
} io_op_t;

/* A call's arguments. It sits on the fiber's stack while the fiber waits,
 * so it is kept to 48 bytes: an op uses one member of each union. */
typedef struct io_call {
    io_op_t op;
    int fd;
    int flags;
    int iovcnt;
    size_t len;
    union {
        void *buf;
        const void *cbuf;
        const struct iovec *iov;
        struct msghdr *msg;
        const struct msghdr *cmsg;
    };
    union {
        struct {
            struct sockaddr *addr;
            socklen_t *addrlen;
        };
        struct {
            const struct sockaddr *caddr;
            socklen_t caddrlen;
        };
    };
} io_call_t;

static inline ssize_t call_libc(const io_call_t *c)
{
    const sp__real_t *r = sp__real();
    switch (c->op) {
    case OP_READ: return r->read(c->fd, c->buf, c->len);
    case OP_READV: return r->readv(c->fd, c->iov, c->iovcnt);
    case OP_RECV: return r->recv(c->fd, c->buf, c->len, c->flags);
    case OP_RECVFROM:
        return r->recvfrom(c->fd, c->buf, c->len, c->flags, c->addr, c->addrlen);
    case OP_RECVMSG: return r->recvmsg(c->fd, c->msg, c->flags);
    case OP_WRITE: return r->write(c->fd, c->cbuf, c->len);
    case OP_WRITEV: return r->writev(c->fd, c->iov, c->iovcnt);
    case OP_SEND: return r->send(c->fd, c->cbuf, c->len, c->flags);
    case OP_SENDTO:
        return r->sendto(c->fd, c->cbuf, c->len, c->flags, c->caddr, c->caddrlen);
    case OP_SENDMSG: return r->sendmsg(c->fd, c->cmsg, c->flags);
    }
    return -1;
}

static inline size_t iov_total(const struct iovec *iov, int n)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += iov[i].iov_len;
    return t;
}

/* The write family on a managed socket (io_write.c), once the call's first
 * try has returned `first` (its result, errno set if -1). In its own unit,
 * so that it is not folded into the read path: a fiber parked in a read
 * then holds a small frame, and each line of a parked stack is a cache
 * miss when the fiber is resumed. */
ssize_t sp__hook_write(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, io_call_t *c,
                       ssize_t first);

/* A read or write call with one buffer, once its fd is looked up
 * (hooks/io.c). */
ssize_t sp__hook_dispatch_buf(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, unsigned fl,
                              io_op_t op, int fd, const void *buf, size_t len);

/* The read/write family on a file fd (SP_FD_FILE in fl): to the helper
 * pool when offload is on for it, else libc's (file_offload.c). */
ssize_t sp__hook_file_io(const sp__hook_bridge_t *b, unsigned fl, io_call_t *c);

#endif
