/* The write family's loop: a write to a socket the user believes blocking
 * goes on until every byte is sent, as a blocking stream socket does; a
 * timeout or error after some progress returns the bytes sent so far. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/iov.h"
#include "io_call.h"
#include "spindle/iomanager.h"

/* What a write call still has to send after `done` more bytes went out.
 * Vectored calls switch to a private copy of the iovec array (and of the
 * msghdr, whose control data went with the first bytes), made on the first
 * partial write. */
typedef struct write_rest {
    struct msghdr msg;
    struct iovec iov[];
} write_rest_t;

static int advance(io_call_t *c, size_t done, write_rest_t **restp)
{
    if (c->op == OP_WRITE || c->op == OP_SEND || c->op == OP_SENDTO) {
        c->cbuf = (const char *)c->cbuf + done;
        c->len -= done;
        return 0;
    }
    write_rest_t *rest = *restp;
    if (!rest) {
        const struct iovec *src = c->op == OP_WRITEV ? c->iov : c->cmsg->msg_iov;
        int n = c->op == OP_WRITEV ? c->iovcnt : (int)c->cmsg->msg_iovlen;
        rest = malloc(sizeof *rest + sizeof rest->iov[0] * (size_t)(n ? n : 1));
        if (!rest)
            return -1;
        *restp = rest;
        memcpy(rest->iov, src, sizeof rest->iov[0] * (size_t)n);
        if (c->op == OP_SENDMSG) {
            rest->msg = *c->cmsg;
            rest->msg.msg_iov = rest->iov;
            rest->msg.msg_control = NULL;
            rest->msg.msg_controllen = 0;
            c->cmsg = &rest->msg;
        } else {
            c->iov = rest->iov;
        }
    }
    /* Where the unsent part starts now (in our copy). */
    struct iovec *iov = c->op == OP_WRITEV ? rest->iov + (c->iov - rest->iov)
                                           : rest->msg.msg_iov;
    int n = c->op == OP_WRITEV ? c->iovcnt : (int)rest->msg.msg_iovlen;
    int i = sp__iov_advance(iov, n, done);
    if (c->op == OP_WRITEV) {
        c->iov = iov + i;
        c->iovcnt = n - i;
    } else {
        rest->msg.msg_iov = iov + i;
        rest->msg.msg_iovlen = (size_t)(n - i);
    }
    return 0;
}

static size_t write_size(const io_call_t *c)
{
    switch (c->op) {
    case OP_WRITEV: return iov_total(c->iov, c->iovcnt);
    case OP_SENDMSG: return iov_total(c->cmsg->msg_iov, (int)c->cmsg->msg_iovlen);
    default: return c->len;
    }
}

ssize_t sp__hook_write(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx, io_call_t *c,
                       ssize_t first)
{
    size_t want = write_size(c), sent = 0;
    write_rest_t *rest = NULL;
    uint64_t deadline = SP_HOOK_FD_DEADLINE;
    ssize_t ret;
    for (ssize_t n = first;; n = call_libc(c)) {
        if (n > 0 && (size_t)n < want - sent) {
            sent += (size_t)n; /* partial write: send the rest */
            if (advance(c, (size_t)n, &rest) < 0) {
                ret = (ssize_t)sent;
                break;
            }
            continue;
        }
        if (n >= 0 || errno != EAGAIN) {
            ret = n >= 0 ? n + (ssize_t)sent : (sent ? (ssize_t)sent : -1);
            break;
        }
        if (sp__hook_wait(b, ctx, c->fd, SP_IO_WRITE, &deadline) < 0) {
            ret = sent ? (ssize_t)sent : -1;
            break;
        }
    }
    if (rest)
        free(rest);
    return ret;
}
