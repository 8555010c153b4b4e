/* spindle TLS: TLS 1.2 and 1.3 streams on OpenSSL 3 over a connected
 * socket, for fibers (docs/tls.md).
 *
 * A config (server or client) holds the certificates and options; any
 * number of connections use it at once, from any worker. A connection
 * wraps a connected TCP socket the caller keeps owning (sp_tls_free does
 * not close it); one fiber at a time uses a connection.
 *
 * The socket is read and written with MSG_DONTWAIT (with ktls: made
 * O_NONBLOCK, for OpenSSL's own reads and writes) and every wait goes
 * through sp_io_wait with the call's deadline, so a TLS call parks only
 * its fiber, with or without the hooks. Outside a fiber (a plain thread)
 * the calls wait in poll(2) instead.
 *
 * Errors: 0 or a count on success, a negative errno on failure:
 *   -ETIMEDOUT          the deadline passed (timeout_us < 0: no deadline)
 *   SP_TLS_EHANDSHAKE   the peer spoke no TLS we accept, or sent an alert
 *   SP_TLS_EVERIFY      the peer's certificate failed verification
 *   -ECONNRESET, -EPIPE the socket failed (or the peer left mid-handshake)
 *   -ENOMEM, -EINVAL
 * After a failure, sp_tls_error_reason() gives OpenSSL's reason as text.
 * Constructors return NULL and set errno the same way.
 */
#ifndef SPINDLE_TLS_H
#define SPINDLE_TLS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The handshake failed: no common protocol or cipher, not TLS at all, an
 * alert from the peer. */
#define SP_TLS_EHANDSHAKE (-EPROTO)
/* The peer's certificate is not trusted or does not name the host. */
#define SP_TLS_EVERIFY (-EKEYREJECTED)

typedef struct sp_tls_config sp_tls_config_t;
typedef struct sp_tls_conn sp_tls_conn_t;

/* One certificate of a server: PEM files. cert_file may hold the chain
 * (leaf first, then intermediates). */
typedef struct sp_tls_cert {
    const char *cert_file;
    const char *key_file;
} sp_tls_cert_t;

typedef struct sp_tls_server_opts {
    /* At least one. With several, the client's SNI name picks the first
     * certificate whose names (subjectAltName DNS entries, else the CN;
     * wildcards as in RFC 6125) match it; no SNI or no match: certs[0]. */
    const sp_tls_cert_t *certs;
    int ncerts;
    /* TLS 1.2 cipher list (OpenSSL syntax); NULL: ECDHE with AES-GCM or
     * ChaCha20-Poly1305 only. TLS 1.3 suites: NULL = OpenSSL's defaults. */
    const char *ciphers;
    const char *ciphersuites;
    /* ALPN protocols in the server's order of preference ("h2",
     * "http/1.1"); a client offering none of them gets no ALPN. */
    const char *const *alpn;
    int nalpn;
    /* Handshake deadline of sp_tls_accept(..., timeout_us = 0); 0 = 10 s. */
    int64_t handshake_timeout_us;
    /* The oldest protocol accepted: "TLSv1.2" (NULL) or "TLSv1.3"; any
     * other text: EINVAL. */
    const char *min_version;
    /* Turn resumption off: no tickets are issued or taken. */
    bool no_resumption;
    /* Kernel TLS for sending (SSL_OP_ENABLE_KTLS) where the kernel has it:
     * sp_tls_sendfile then hands files to sendfile(2) and the kernel
     * encrypts them. Its connections run on OpenSSL's socket BIO: the
     * socket is set O_NONBLOCK (and left so), and a write to a peer that
     * went away raises SIGPIPE (ignore it). Making such a config logs once
     * on "spindle.tls" whether the kernel has TLS. See docs/tls.md. */
    bool ktls;
} sp_tls_server_opts_t;

typedef struct sp_tls_client_opts {
    /* Trusted CAs (PEM, may hold several); NULL: the system store
     * (Debian: ca-certificates, /etc/ssl/certs). */
    const char *ca_file;
    const char *ciphers;      /* as in the server options */
    const char *ciphersuites;
    const char *const *alpn;  /* offered in this order */
    int nalpn;
    /* Handshake deadline of sp_tls_connect(..., timeout_us = 0); 0 = 10 s. */
    int64_t handshake_timeout_us;
    /* FOR TESTS ONLY: accept any certificate and any name. The connection
     * is encrypted but the peer is not authenticated at all. */
    bool insecure;
    bool ktls; /* as in the server options */
} sp_tls_client_opts_t;

/* Build a config from PEM files (read now). NULL + errno: ENOENT/EACCES
 * (a file cannot be read), EINVAL (bad PEM, key not matching its
 * certificate, bad cipher list or ALPN name; see sp_tls_error_reason),
 * ENOMEM. The options are copied. */
sp_tls_config_t *sp_tls_server_config(const sp_tls_server_opts_t *opts);
/* opts may be NULL: verify against the system store. */
sp_tls_config_t *sp_tls_client_config(const sp_tls_client_opts_t *opts);
/* Read the config's files again (certificates and keys; a client's CA
 * file). Handshakes that start afterwards use them; connections already
 * made keep what they were made with. On failure (same errnos as the
 * constructor) the config stays as it was. Safe from any thread while
 * connections run. Tickets issued under the old files do not resume. */
int sp_tls_config_reload(sp_tls_config_t *cfg);
/* Release the caller's reference: live connections keep what they use. */
void sp_tls_config_free(sp_tls_config_t *cfg);

/* Server handshake on a connected socket. timeout_us: 0 = the config's
 * handshake timeout, < 0 = none. 0 and *out, or a negative errno. */
int sp_tls_accept(sp_tls_config_t *cfg, int fd, int64_t timeout_us, sp_tls_conn_t **out);
/* Client handshake: host is sent as SNI (unless it is an IP address) and
 * the certificate must name it (DNS name or IP address) and chain to a
 * trusted CA, unless the config is insecure. host may be NULL only with an
 * insecure config. timeout_us as in sp_tls_accept. */
int sp_tls_connect(sp_tls_config_t *cfg, int fd, const char *host, int64_t timeout_us,
                   sp_tls_conn_t **out);

/* Up to len bytes: the count (> 0), 0 when the peer closed (close_notify,
 * or the TCP connection ended: framing above TLS must catch truncation),
 * or a negative errno. timeout_us < 0: no deadline. */
ssize_t sp_tls_read(sp_tls_conn_t *c, void *buf, size_t len, int64_t timeout_us);
/* All len bytes or a negative errno; timeout_us bounds the whole call. */
ssize_t sp_tls_write(sp_tls_conn_t *c, const void *buf, size_t len, int64_t timeout_us);
/* Send len bytes of file_fd from offset off: with kernel TLS on for the
 * connection, sendfile(2) through SSL_sendfile; else read in 64 KiB pieces
 * and written as sp_tls_write does. len or a negative errno (-EIO: the
 * file ended first). timeout_us bounds each wait for the peer to take more
 * (a stall), not the whole transfer; after a failure close the connection. */
ssize_t sp_tls_sendfile(sp_tls_conn_t *c, int file_fd, off_t off, size_t len,
                        int64_t timeout_us);
/* Whether the kernel encrypts what this connection sends (kernel TLS on:
 * the config asked for it, the kernel has it and took the cipher). */
bool sp_tls_ktls_send(const sp_tls_conn_t *c);
/* Send close_notify (waiting at most timeout_us to get it out); the peer's
 * is not awaited. 0 or a negative errno: -ENOTCONN, sending nothing, after
 * a fatal failure, and with ktls after any failed write. */
int sp_tls_shutdown(sp_tls_conn_t *c, int64_t timeout_us);
/* Free the connection; the socket stays open. NULL is fine. */
void sp_tls_free(sp_tls_conn_t *c);

/* The ALPN protocol agreed on, or NULL. */
const char *sp_tls_alpn(const sp_tls_conn_t *c);
/* Whether the handshake was a resumption (a ticket from an earlier
 * handshake), not a full one. */
bool sp_tls_session_reused(const sp_tls_conn_t *c);
/* "TLSv1.2" or "TLSv1.3". */
const char *sp_tls_version(const sp_tls_conn_t *c);
/* The SNI name: the one the client sent (server side), the one sent
 * (client side); NULL if none (a client connecting to an IP address sends
 * none). */
const char *sp_tls_server_name(const sp_tls_conn_t *c);

/* The reason for the last failing sp_tls_ call of this thread, as text
 * (a certificate verification result such as "certificate has expired", or
 * OpenSSL's error reason); "" if none. Read it right after the call, before
 * the fiber waits again: other fibers of the worker share it. */
const char *sp_tls_error_reason(void);

#ifdef __cplusplus
}
#endif
#endif
