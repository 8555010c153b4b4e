/* Connection output: gathered writes and sendfile on the non-blocking
 * socket, each wait for writability bounded by the send timeout.
 *
 * The calls use MSG_DONTWAIT and wait with sp_io_wait themselves rather
 * than relying on the hooks, so the server behaves the same in every
 * flavour of the library, and every wait has the send timeout. sendfile(2)
 * has no such flag and is hooked (a hooked one would wait by itself, with
 * the socket's own SO_SNDTIMEO: none): it goes to the kernel as a raw
 * system call on the socket, which is non-blocking underneath.
 * MSG_NOSIGNAL: a client that went away gives EPIPE, never SIGPIPE. */
#include <errno.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/iov.h"
#include "http_internal.h"
#include "io/iomanager_internal.h"
#include "spindle/timer.h"

uint64_t sp__http_deadline(int64_t us)
{
    return us < 0 ? 0 : sp__now_ns() + (uint64_t)us * 1000u;
}

int64_t sp__http_left_us(uint64_t deadline_ns)
{
    if (!deadline_ns)
        return -1;
    uint64_t now = sp__now_ns();
    /* Rounded up: a wait for what is left never ends before the deadline. */
    return now >= deadline_ns ? 0 : (int64_t)((deadline_ns - now + 999) / 1000);
}

int64_t sp__http_cut_us(int64_t us, uint64_t until_ns)
{
    if (!until_ns)
        return us < 0 ? -1 : us;
    uint64_t wait = sp__http_deadline(us);
    return sp__http_left_us(wait && wait < until_ns ? wait : until_ns);
}

static int wait_writable(sp__http_out_t *o)
{
    o->waits++;
    int64_t us = sp__http_cut_us(o->timeout_us, o->until_ns);
    return us == 0 ? -ETIMEDOUT : sp__io_wait_or_poll(o->fd, SP_IO_WRITE, us);
}

/* One recv into `in` (into the thread's input scratch when `borrowed` is
 * given and `in` is empty); -EAGAIN when nothing is there. */
static ssize_t recv_into(int fd, sp_buf_t *in, bool *borrowed, size_t size,
                         bool *drained)
{
    if (borrowed)
        sp__http_scratch_borrow(in, borrowed, SP__SCRATCH_IN);
    char *dst = sp__buf_reserve(in, size);
    ssize_t n = dst ? recv(fd, dst, size, MSG_DONTWAIT) : -1;
    int err = dst ? errno : ENOMEM;
    if (n > 0) {
        *drained = (size_t)n < size;
        sp__buf_commit(in, (size_t)n);
    } else if (n == 0) {
        *drained = true;
    }
    if (borrowed) /* not held across a wait: kept only if it holds bytes */
        sp__http_scratch_return(in, borrowed, SP__SCRATCH_IN);
    return n >= 0 ? n : -err;
}

static ssize_t read_some(int fd, sp_buf_t *in, bool *borrowed, size_t size,
                         uint64_t deadline, bool *drained)
{
    for (;;) {
        if (!*drained) {
            ssize_t n = recv_into(fd, in, borrowed, size, drained);
            if (n >= 0 || (n != -EAGAIN && n != -EINTR))
                return n;
        }
        *drained = false;
        int64_t us = sp__http_left_us(deadline);
        if (us == 0)
            return -ETIMEDOUT;
        int rc = sp__io_wait_or_poll(fd, SP_IO_READ, us);
        if (rc < 0)
            return rc;
    }
}

/* One TLS read into `in`: sp_tls_read waits itself (bytes may sit in
 * its buffers with the socket empty, so there is no drained hint). */
static ssize_t tls_read(sp_tls_conn_t *tls, sp_buf_t *in, bool *borrowed, size_t size,
                        uint64_t deadline)
{
    int64_t us = sp__http_left_us(deadline);
    if (us == 0)
        return -ETIMEDOUT;
    if (borrowed)
        sp__http_scratch_borrow(in, borrowed, SP__SCRATCH_IN);
    char *dst = sp__buf_reserve(in, size);
    ssize_t n = dst ? sp_tls_read(tls, dst, size, us) : -ENOMEM;
    if (n > 0)
        sp__buf_commit(in, (size_t)n);
    if (borrowed)
        sp__http_scratch_return(in, borrowed, SP__SCRATCH_IN);
    return n;
}

static ssize_t read_lent(int fd, sp_tls_conn_t *tls, sp_buf_t *in, bool *borrowed,
                         size_t size, uint64_t deadline, bool *drained)
{
    if (tls)
        return tls_read(tls, in, borrowed, size, deadline);
    return read_some(fd, in, borrowed, size, deadline, drained);
}

ssize_t sp__http_read_lent(int fd, sp_tls_conn_t *tls, sp_buf_t *in, bool *borrowed,
                           size_t size, uint64_t deadline, bool *drained)
{
    return read_lent(fd, tls, in, borrowed, size, deadline, drained);
}

/* Here, not with the deadlines: a server's every read comes this way, and
 * read_lent() is then no call of its own. */
ssize_t sp__http_read_by(sp__http_deadline_t *d, int fd, sp_tls_conn_t *tls, sp_buf_t *in,
                         bool *borrowed, size_t size, uint64_t deadline, bool *drained)
{
    if (!d)
        return read_lent(fd, tls, in, borrowed, size, deadline, drained);
    sp__http_deadline_set(d, deadline);
    ssize_t n = read_lent(fd, tls, in, borrowed, size, 0, drained);
    sp__http_deadline_clear(d);
    return n == -ECANCELED && sp__http_deadline_expired(d) ? -ETIMEDOUT : n;
}

/* Drop `done` bytes from the front of iov[0..*n). */
static struct iovec *advance(struct iovec *iov, int *n, size_t done)
{
    int i = sp__iov_advance(iov, *n, done);
    *n -= i;
    return iov + i;
}

enum { MAX_IOV = 4 };

/* TLS output: each piece with sp_tls_write, which writes all of it (its
 * own waits bounded as the plain path's are). */
static int tls_send(sp__http_out_t *o, const struct iovec *iov, int cnt)
{
    for (int i = 0; i < cnt; i++) {
        int64_t us = sp__http_cut_us(o->timeout_us, o->until_ns);
        if (us == 0)
            return -ETIMEDOUT;
        ssize_t w = sp_tls_write(o->tls, iov[i].iov_base, iov[i].iov_len, us);
        if (w < 0)
            return (int)w;
        o->written += iov[i].iov_len;
    }
    return 0;
}

int sp__http_out_flush(sp__http_out_t *o, const struct iovec *extra, int n)
{
    struct iovec vec[MAX_IOV];
    int cnt = 0;
    if (sp__buf_len(&o->buf))
        vec[cnt++] = (struct iovec){sp__buf_data(&o->buf), sp__buf_len(&o->buf)};
    for (int i = 0; i < n && cnt < MAX_IOV; i++)
        if (extra[i].iov_len)
            vec[cnt++] = extra[i];
    if (o->tls) {
        int rc = tls_send(o, vec, cnt);
        sp__buf_clear(&o->buf);
        return rc;
    }
    struct iovec *iov = vec;
    int rc = 0;
    while (cnt) {
        /* One buffer (the usual whole response) goes out with send(): the
         * kernel then has no msghdr and iovec to copy in from the fiber's
         * stack, which costs a little on every call and, on a connection's
         * new stack, the kernel's first touch of that page (a burst of new
         * connections spends much time there: bench/peers.sh http-burst). */
        ssize_t w;
        if (cnt == 1) {
            w = send(o->fd, iov->iov_base, iov->iov_len, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
            w = sendmsg(o->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        if (w >= 0) {
            o->written += (size_t)w;
            iov = advance(iov, &cnt, (size_t)w);
        } else if (errno == EAGAIN) {
            if ((rc = wait_writable(o)) < 0)
                break;
        } else if (errno != EINTR) {
            rc = -errno;
            break;
        }
    }
    sp__buf_clear(&o->buf);
    return rc;
}

int sp__http_out_sendfile(sp__http_out_t *o, int file_fd, off_t off, size_t len,
                          size_t *sent)
{
    int rc = sp__http_out_flush(o, NULL, 0);
    *sent = 0;
    if (rc == 0 && o->tls) {
        /* Its timeout bounds each wait, as the send timeout does here
         * (responses, the only senders of files, have no until_ns). */
        ssize_t w = sp_tls_sendfile(o->tls, file_fd, off, len, o->timeout_us);
        if (w < 0)
            return (int)w;
        *sent = len;
        o->written += len;
        return 0;
    }
    while (rc == 0 && len) {
        ssize_t w = syscall(SYS_sendfile, o->fd, file_fd, &off, len);
        if (w > 0) {
            len -= (size_t)w;
            *sent += (size_t)w;
            o->written += (size_t)w;
        } else if (w == 0) {
            rc = -EIO; /* the file is shorter than it said: shrunk meanwhile */
        } else if (errno == EAGAIN) {
            rc = wait_writable(o);
        } else if (errno != EINTR) {
            rc = -errno;
        }
    }
    return rc;
}
