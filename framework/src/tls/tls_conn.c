/* Connections: every OpenSSL call runs to completion without a switch
 * (the BIO never blocks), and a WANT_READ / WANT_WRITE becomes a wait on
 * the socket until the call's deadline. OpenSSL's error queue is per
 * thread and fibers of one worker share it: it is cleared before each
 * call and read right after it, before any wait. */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fiber/fiber_internal.h"
#include "spindle/iomanager.h"
#include "spindle/timer.h"
#include "tls_internal.h"

struct sp_tls_conn {
    SSL *ssl;
    sp__tls_gen_t *gen; /* the generation it was made from */
    sp__tls_sock_t sock;
    char *alpn;         /* NUL-terminated copy of the protocol agreed on */
    bool failed;        /* a fatal error: no close_notify may follow */
    bool ktls;          /* on OpenSSL's socket BIO (tls_ktls.c), not ours */
};

/* One OpenSSL call: > 0 when done (*done: bytes moved). */
typedef int (*op_fn)(SSL *ssl, void *buf, size_t len, size_t *done);

static int op_handshake(SSL *ssl, void *buf, size_t len, size_t *done)
{
    (void)buf;
    (void)len;
    (void)done;
    return SSL_do_handshake(ssl);
}

static int op_read(SSL *ssl, void *buf, size_t len, size_t *done)
{
    return SSL_read_ex(ssl, buf, len, done);
}

static int op_write(SSL *ssl, void *buf, size_t len, size_t *done)
{
    return SSL_write_ex(ssl, buf, len, done);
}

/* A file's bytes from `off` (SSL_sendfile's arguments). */
typedef struct file_at {
    int fd;
    off_t off;
} file_at_t;

static int op_sendfile(SSL *ssl, void *arg, size_t len, size_t *done)
{
    file_at_t *f = arg;
    errno = 0;
    ossl_ssize_t n = SSL_sendfile(ssl, f->fd, f->off, len, 0);
    if (n >= 0) {
        *done = (size_t)n; /* 0: the file ended */
        return 1;
    }
    /* sendfile(2) failed: drop OpenSSL's generic error so that the call
     * ends as SSL_ERROR_SYSCALL with sendfile's errno (drive). */
    int err = errno;
    if (err && err != EAGAIN && err != EINTR && err != EBUSY) {
        ERR_clear_error();
        errno = err;
    }
    return -1;
}

static int op_shutdown(SSL *ssl, void *buf, size_t len, size_t *done)
{
    (void)buf;
    (void)len;
    (void)done;
    /* 0: our close_notify is out, the peer's not yet in; enough. */
    return SSL_shutdown(ssl) >= 0 ? 1 : -1;
}

static uint64_t deadline_of(int64_t us)
{
    return us < 0 ? 0 : sp_now_ns() + (uint64_t)us * 1000u;
}

/* A fatal SSL_get_error result as a negative errno, with its reason. */
static int failure(sp_tls_conn_t *c, int e)
{
    c->failed = true;
    if (e == SSL_ERROR_SYSCALL) {
        ERR_clear_error();
        sp__tls_set_reason(c->sock.err ? "socket error" : "connection ended");
        return c->sock.err ? -c->sock.err : -ECONNRESET;
    }
    long v = SSL_get_verify_result(c->ssl);
    if (SSL_get_verify_mode(c->ssl) != SSL_VERIFY_NONE && v != X509_V_OK) {
        ERR_clear_error();
        sp__tls_set_reason(X509_verify_cert_error_string(v));
        return SP_TLS_EVERIFY;
    }
    sp__tls_reason_from_queue(e == SSL_ERROR_SSL ? "protocol error" : "unexpected OpenSSL state");
    return SP_TLS_EHANDSHAKE;
}

static int wait_for(int fd, int event, uint64_t deadline)
{
    int rc = sp__tls_wait(fd, event, deadline);
    if (rc)
        sp__tls_set_reason(rc == -ETIMEDOUT ? "timed out" : "wait failed");
    return rc;
}

/* One OpenSSL call, run on the thread's side stack: OpenSSL's frames are
 * deep and never wait here (the socket never blocks; drive() waits), so a
 * fiber's own stack stays shallow and the crypto's frames stay warm. */
typedef struct op_call {
    op_fn op;
    SSL *ssl;
    void *buf;
    size_t len;
    size_t *done;
    int r, err; /* its result, and errno right after it */
} op_call_t;

static void run_op(void *p)
{
    op_call_t *k = p;
    k->r = k->op(k->ssl, k->buf, k->len, k->done);
    k->err = errno;
}

/* Run op until it completes: 0, 1 when the peer closed, or -errno. */
static int drive(sp_tls_conn_t *c, op_fn op, void *buf, size_t len, size_t *done,
                 uint64_t deadline)
{
    for (;;) {
        /* OpenSSL wants an empty queue before the call; peeking is cheaper
         * than clearing its sixteen slots every time. */
        if (ERR_peek_error())
            ERR_clear_error();
        /* A read when the socket was left empty and OpenSSL holds nothing
         * would only find it so again: wait first (as the hooks do for a
         * stream socket), one call into OpenSSL and one recv fewer for a
         * kept-alive connection that waits for its next request. Past
         * the deadline the read still takes what is there. */
        if (op == op_read && c->sock.drained && !SSL_has_pending(c->ssl)) {
            int rc = wait_for(c->sock.fd, SP_IO_READ, deadline);
            if (rc && rc != -ETIMEDOUT)
                return rc;
            c->sock.drained = false;
        }
        c->sock.err = 0;
        op_call_t k = {op, c->ssl, buf, len, done, 0, 0};
        sp__side_call(run_op, &k);
        if (k.r > 0)
            return 0;
        /* OpenSSL's socket BIO leaves a failed call's errno (0 at EOF). */
        if (c->ktls)
            c->sock.err = k.err;
        int e = SSL_get_error(c->ssl, k.r), event;
        if (e == SSL_ERROR_WANT_READ) {
            /* SSL_MODE_RELEASE_BUFFERS frees the read buffer once a record
             * is consumed, but the read that then finds the socket empty
             * allocates it again: a connection waiting for its peer (in the
             * handshake, or idle between requests) would keep it, 16 KiB
             * each. Freed unless it holds bytes. */
            SSL_free_buffers(c->ssl);
            event = SP_IO_READ;
        } else if (e == SSL_ERROR_WANT_WRITE)
            event = SP_IO_WRITE;
        else if (e == SSL_ERROR_ZERO_RETURN)
            return 1;
        else
            return failure(c, e);
        int rc = wait_for(c->sock.fd, event, deadline);
        if (rc)
            return rc;
        if (event == SP_IO_READ)
            c->sock.drained = false;
    }
}

static sp_tls_conn_t *conn_new(sp_tls_config_t *cfg, int fd)
{
    sp_tls_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->sock.fd = fd;
    c->ktls = cfg->ktls;
    c->gen = sp__tls_config_gen(cfg);
    c->ssl = SSL_new(c->gen->ctx[0]);
    BIO *b = !c->ssl ? NULL : c->ktls ? sp__tls_ktls_bio(fd) : sp__tls_bio_new(&c->sock);
    if (!b) {
        sp_tls_free(c);
        return NULL;
    }
    SSL_set_bio(c->ssl, b, b);
    return c;
}

static int handshake(sp_tls_conn_t *c, uint64_t deadline, sp_tls_conn_t **out)
{
    int rc = drive(c, op_handshake, NULL, 0, NULL, deadline);
    if (rc == 1) {
        sp__tls_set_reason("the peer closed the connection in the handshake");
        rc = -ECONNRESET;
    }
    const unsigned char *p;
    unsigned n = 0;
    if (!rc)
        SSL_get0_alpn_selected(c->ssl, &p, &n);
    if (n && (c->alpn = malloc(n + 1))) {
        memcpy(c->alpn, p, n);
        c->alpn[n] = '\0';
    } else if (n) {
        rc = -ENOMEM;
    }
    if (rc) {
        sp_tls_free(c);
        return rc;
    }
    /* From now on read whole socket buffers, not a record's 5-byte header
     * and then its body: one recv per request instead of two. (Not in the
     * handshake: reading its flights ahead leaves more of the heap behind,
     * 2-4 KiB a connection.) The reads never wait before asking OpenSSL
     * (sp_tls_read), so bytes it holds are seen. */
    SSL_set_read_ahead(c->ssl, 1);
    *out = c;
    return 0;
}

int sp_tls_accept(sp_tls_config_t *cfg, int fd, int64_t timeout_us, sp_tls_conn_t **out)
{
    sp__tls_set_reason(NULL);
    if (!cfg || !cfg->server || fd < 0 || !out)
        return -EINVAL;
    uint64_t deadline = deadline_of(timeout_us ? timeout_us : cfg->handshake_us);
    /* No SSL object before the ClientHello starts to arrive: a client
     * that connects and stays silent costs its fiber only (an SSL object
     * waiting in the handshake takes about 40 KiB). */
    char byte;
    if (recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN) {
        int rc = wait_for(fd, SP_IO_READ, deadline);
        if (rc)
            return rc;
    }
    sp_tls_conn_t *c = conn_new(cfg, fd);
    if (!c)
        return -ENOMEM;
    SSL_set_accept_state(c->ssl);
    return handshake(c, deadline, out);
}

/* SNI and the name the certificate must carry: a DNS name, or an IP
 * address (which goes without SNI, RFC 6066). */
static int client_name(const sp_tls_config_t *cfg, SSL *ssl, const char *host)
{
    unsigned char ip[16];
    bool literal = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    if (!literal && !SSL_set_tlsext_host_name(ssl, host))
        return -EINVAL;
    if (cfg->insecure)
        return 0;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    int ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
                     : SSL_set1_host(ssl, host);
    return ok == 1 ? 0 : -EINVAL;
}

int sp_tls_connect(sp_tls_config_t *cfg, int fd, const char *host, int64_t timeout_us,
                   sp_tls_conn_t **out)
{
    sp__tls_set_reason(NULL);
    if (!cfg || cfg->server || fd < 0 || !out || (!host && !cfg->insecure))
        return -EINVAL;
    sp_tls_conn_t *c = conn_new(cfg, fd);
    if (!c)
        return -ENOMEM;
    int rc = host ? client_name(cfg, c->ssl, host) : 0;
    if (rc) {
        sp__tls_set_reason("bad host name");
        sp_tls_free(c);
        return rc;
    }
    SSL_set_connect_state(c->ssl);
    return handshake(c, deadline_of(timeout_us ? timeout_us : cfg->handshake_us), out);
}

ssize_t sp_tls_read(sp_tls_conn_t *c, void *buf, size_t len, int64_t timeout_us)
{
    sp__tls_set_reason(NULL);
    if (!c || (!buf && len))
        return -EINVAL;
    if (len == 0)
        return 0;
    size_t n = 0;
    int rc = drive(c, op_read, buf, len, &n, deadline_of(timeout_us));
    return rc < 0 ? rc : rc == 1 ? 0 : (ssize_t)n;
}

/* All len bytes: 0 or -errno. The deadline bounds the whole, or with
 * `renew` each OpenSSL call (a stall limit: each moves a record or more,
 * partial writes being on). */
static int write_all(sp_tls_conn_t *c, const char *buf, size_t len, int64_t timeout_us,
                     bool renew)
{
    uint64_t deadline = deadline_of(timeout_us);
    for (size_t off = 0; off < len;) {
        size_t n = 0;
        int rc = drive(c, op_write, (char *)buf + off, len - off, &n, deadline);
        if (rc) {
            /* Kernel TLS writes from the caller's buffer, not a copy: a
             * record left half-sent would be finished from memory that
             * may hold other bytes by then (sp_tls_shutdown would). */
            c->failed |= c->ktls;
            return rc < 0 ? rc : -EPIPE;
        }
        off += n;
        if (renew)
            deadline = deadline_of(timeout_us);
    }
    return 0;
}

ssize_t sp_tls_write(sp_tls_conn_t *c, const void *buf, size_t len, int64_t timeout_us)
{
    sp__tls_set_reason(NULL);
    if (!c || (!buf && len) || len > SSIZE_MAX)
        return -EINVAL;
    int rc = write_all(c, buf, len, timeout_us, false);
    return rc < 0 ? rc : (ssize_t)len;
}

/* The kernel encrypts: sendfile(2) through SSL_sendfile, in as many calls
 * as the socket's buffer takes. */
static int file_by_kernel(sp_tls_conn_t *c, int fd, off_t off, size_t len, int64_t timeout_us)
{
    file_at_t f = {fd, off};
    while (len) {
        size_t n = 0;
        int rc = drive(c, op_sendfile, &f, len, &n, deadline_of(timeout_us));
        if (rc)
            return rc < 0 ? rc : -EPIPE;
        if (n == 0) {
            sp__tls_set_reason("the file ended early");
            return -EIO;
        }
        f.off += (off_t)n;
        len -= n;
    }
    return 0;
}

/* OpenSSL encrypts: the file read in pieces, each written. */
static int file_in_pieces(sp_tls_conn_t *c, int fd, off_t off, size_t len, int64_t timeout_us)
{
    enum { PIECE = 64 * 1024 };
    char *piece = malloc(PIECE);
    int rc = piece ? 0 : -ENOMEM;
    while (rc == 0 && len) {
        ssize_t r = pread(fd, piece, len < PIECE ? len : PIECE, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            sp__tls_set_reason(r < 0 ? "cannot read the file" : "the file ended early");
            rc = r < 0 ? -errno : -EIO;
            break;
        }
        rc = write_all(c, piece, (size_t)r, timeout_us, true);
        off += r;
        len -= (size_t)r;
    }
    free(piece);
    return rc;
}

ssize_t sp_tls_sendfile(sp_tls_conn_t *c, int file_fd, off_t off, size_t len,
                        int64_t timeout_us)
{
    sp__tls_set_reason(NULL);
    if (!c || file_fd < 0 || off < 0 || len > SSIZE_MAX)
        return -EINVAL;
    int rc = sp_tls_ktls_send(c) ? file_by_kernel(c, file_fd, off, len, timeout_us)
                                 : file_in_pieces(c, file_fd, off, len, timeout_us);
    return rc < 0 ? rc : (ssize_t)len;
}

bool sp_tls_ktls_send(const sp_tls_conn_t *c)
{
    return c && c->ktls && BIO_get_ktls_send(SSL_get_wbio(c->ssl));
}

int sp_tls_shutdown(sp_tls_conn_t *c, int64_t timeout_us)
{
    sp__tls_set_reason(NULL);
    if (!c)
        return -EINVAL;
    if (c->failed)
        return -ENOTCONN;
    int rc = drive(c, op_shutdown, NULL, 0, NULL, deadline_of(timeout_us));
    return rc < 0 ? rc : 0;
}

void sp_tls_free(sp_tls_conn_t *c)
{
    if (!c)
        return;
    SSL_free(c->ssl);
    sp__tls_gen_unref(c->gen);
    free(c->alpn);
    free(c);
}

const char *sp_tls_alpn(const sp_tls_conn_t *c)
{
    return c ? c->alpn : NULL;
}

bool sp_tls_session_reused(const sp_tls_conn_t *c)
{
    return c && SSL_session_reused(c->ssl);
}

const char *sp_tls_version(const sp_tls_conn_t *c)
{
    return c ? SSL_get_version(c->ssl) : NULL;
}

const char *sp_tls_server_name(const sp_tls_conn_t *c)
{
    return c ? SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name) : NULL;
}
