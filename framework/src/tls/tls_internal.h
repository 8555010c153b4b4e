/* The TLS layer's shared internals: a config's generation of SSL_CTXs,
 * the socket BIO and the error-reason slot. */
#ifndef SP_TLS_INTERNAL_H
#define SP_TLS_INTERNAL_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "spindle/tls.h"

/* What one read of a config's files made: one SSL_CTX per certificate (a
 * client has one). Connections hold a reference, so a reload can swap in
 * a new generation while handshakes of the old one finish. */
typedef struct sp__tls_gen {
    atomic_int refs;
    int n;
    unsigned char *alpn; /* wire format (length-prefixed names), or NULL */
    unsigned alpn_len;
    SSL_CTX *ctx[];
} sp__tls_gen_t;

struct sp_tls_config {
    bool server;
    pthread_mutex_t lock; /* guards gen: taken only to swap or reference it */
    sp__tls_gen_t *gen;
    int64_t handshake_us;
    int min_version; /* TLS1_2_VERSION or TLS1_3_VERSION */
    /* The options, copied, to read the files again on reload. */
    sp_tls_cert_t *certs;
    int ncerts;
    char *ciphers, *ciphersuites, *ca_file;
    unsigned char *alpn;
    unsigned alpn_len;
    bool no_resumption, insecure, ktls;
};

/* Build a generation from cfg's options: 0 or -errno (reason set). */
int sp__tls_gen_build(const sp_tls_config_t *cfg, sp__tls_gen_t **out);
/* A reference to cfg's current generation. */
sp__tls_gen_t *sp__tls_config_gen(sp_tls_config_t *cfg);
sp__tls_gen_t *sp__tls_gen_ref(sp__tls_gen_t *g);
void sp__tls_gen_unref(sp__tls_gen_t *g);

/* The socket of a connection, as its BIO sees it: err is the errno of
 * the last failed recv/send (not EAGAIN). */
typedef struct sp__tls_sock {
    int fd;
    int err;
    /* The last read found the socket empty, or took less than asked for
     * (its receive queue was emptied): wait before reading again. */
    bool drained;
} sp__tls_sock_t;

/* A BIO reading and writing s->fd with MSG_DONTWAIT; s must outlive it.
 * NULL when out of memory. */
BIO *sp__tls_bio_new(sp__tls_sock_t *s);
/* Kernel TLS (tls_ktls.c): OpenSSL's socket BIO on fd (not closed with
 * it), fd set O_NONBLOCK first; NULL on failure. */
BIO *sp__tls_ktls_bio(int fd);
/* Log once per process whether the kernel can take kernel TLS. */
void sp__tls_ktls_report(void);
/* Wait for fd to be readable or writable (SP_IO_READ / SP_IO_WRITE) until
 * deadline_ns (0: none). */
int sp__tls_wait(int fd, int event, uint64_t deadline_ns);

/* Set this thread's reason text (a static string; NULL: ""). */
void sp__tls_set_reason(const char *why);
/* The reason from OpenSSL's error queue (then cleared), or `fallback`. */
void sp__tls_reason_from_queue(const char *fallback);

#endif
