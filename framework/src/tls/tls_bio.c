/* The socket under a TLS connection: a BIO that never blocks (recv/send
 * with MSG_DONTWAIT, so the hooks and the fd's O_NONBLOCK do not matter),
 * the wait that follows OpenSSL's WANT_READ / WANT_WRITE (sp_io_wait's
 * park in a fiber, poll on a plain thread), and the
 * per-thread reason text of the last failure.
 * MSG_NOSIGNAL: a peer that went away gives EPIPE, never SIGPIPE. */
#include <errno.h>
#include <openssl/err.h>
#include <stdint.h>
#include <sys/socket.h>

#include "io/iomanager_internal.h"
#include "spindle/timer.h"
#include "tls_internal.h"

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

static int sock_result(BIO *b, ssize_t n, bool reading)
{
    BIO_clear_retry_flags(b);
    if (n >= 0)
        return (int)n;
    sp__tls_sock_t *s = BIO_get_data(b);
    if (errno == EAGAIN || errno == EINTR) {
        if (reading)
            BIO_set_retry_read(b);
        else
            BIO_set_retry_write(b);
    } else {
        s->err = errno;
    }
    return -1;
}

static int sock_read(BIO *b, char *buf, int len)
{
    sp__tls_sock_t *s = BIO_get_data(b);
    ssize_t n = recv(s->fd, buf, (size_t)len, MSG_DONTWAIT);
    s->drained = n < len && (n > 0 || errno == EAGAIN);
    return sock_result(b, n, true);
}

static int sock_write(BIO *b, const char *buf, int len)
{
    sp__tls_sock_t *s = BIO_get_data(b);
    return sock_result(b, send(s->fd, buf, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL), false);
}

static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    /* Writes go straight to the socket: nothing is ever pending. */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static void method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "spindle socket");
    if (m && BIO_meth_set_read(m, sock_read) && BIO_meth_set_write(m, sock_write) &&
        BIO_meth_set_ctrl(m, sock_ctrl)) {
        method = m;
        return;
    }
    BIO_meth_free(m);
}

BIO *sp__tls_bio_new(sp__tls_sock_t *s)
{
    pthread_once(&method_once, method_make);
    BIO *b = method ? BIO_new(method) : NULL;
    if (!b)
        return NULL;
    BIO_set_data(b, s);
    BIO_set_init(b, 1);
    return b;
}

int sp__tls_wait(int fd, int event, uint64_t deadline_ns)
{
    int64_t us = -1;
    if (deadline_ns) {
        uint64_t now = sp_now_ns();
        if (now >= deadline_ns)
            return -ETIMEDOUT;
        us = (int64_t)((deadline_ns - now + 999) / 1000); /* never ends early */
    }
    return sp__io_wait_or_poll(fd, event, us);
}

/* A pointer to a static string: 8 bytes of static TLS. */
static _Thread_local const char *reason;

void sp__tls_set_reason(const char *why)
{
    reason = why;
}

void sp__tls_reason_from_queue(const char *fallback)
{
    const char *why = ERR_reason_error_string(ERR_peek_last_error());
    ERR_clear_error();
    reason = why ? why : fallback;
}

const char *sp_tls_error_reason(void)
{
    return reason ? reason : "";
}
