/* The TLS tests' shared fixture (tests/tls/): certificates made once per
 * test program with the openssl program (make_certs.sh), an in-process
 * TLS echo server on 127.0.0.1 (a TCP server whose handler runs
 * sp_tls_accept), and running client programs.
 *
 * The echo server echoes what it reads; a read that starts with "?info"
 * is answered with one line instead ("version=TLSv1.3 alpn=http/1.1
 * sni=a.test reused=0"), after which the server closes the connection
 * (close_notify). "?file OFF LEN" is answered with those bytes of the
 * server's file (sp_tls_sendfile of file_fd), then the server closes.
 * Each handler's sp_tls_accept result is counted. */
#ifndef SP_TLS_FIXTURE_H
#define SP_TLS_FIXTURE_H

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>
#include <spindle/tls.h>

/* How a connection's sp_tls_accept ended. */
typedef enum tls_result {
    TLS_OK,
    TLS_TIMEDOUT,  /* -ETIMEDOUT */
    TLS_HANDSHAKE, /* SP_TLS_EHANDSHAKE */
    TLS_GONE,      /* the peer left: -ECONNRESET, -EPIPE */
    TLS_OTHER,
    TLS_RESULTS
} tls_result_t;

typedef struct tls_server {
    sp_iomanager_t *io;
    sp_tcp_server_t *srv;
    sp_tls_config_t *cfg;
    sp_addr_t addr;
    int port;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int results[TLS_RESULTS]; /* under lock */
    int finished;             /* handlers done, under lock */
    int file_fd;              /* for "?file" (tls_server_set), under lock */
    int sndbuf;               /* > 0: SO_SNDBUF of accepted sockets, under lock */
    ssize_t file_rc;          /* the last sp_tls_sendfile's result, under lock */
    int ktls_sends;           /* connections with sp_tls_ktls_send, under lock */
} tls_server_t;

/* The certificates' directory: made by tls_certs_make (from main, before
 * the tests fork), removed by tls_certs_remove. */
void tls_certs_make(void);
void tls_certs_remove(void);
/* sp_test_run(s), then tls_certs_remove(): a TLS test program's end. */
int tls_suite_run(Suite *s);
/* The path of a file there ("a.pem", "ca1.pem"); the last 8 stay valid. */
const char *tls_file(const char *name);

/* Server options with the certificates named ("a", "b": a.pem + a.key...;
 * the paths are tls_file's: make the config before more calls of it). */
void tls_server_opts(sp_tls_server_opts_t *o, sp_tls_cert_t *certs, const char *const *names,
                     int n);
/* Start the echo server with `threads` workers (the config is made from o). */
void tls_server_start(tls_server_t *s, const sp_tls_server_opts_t *o, int threads);
void tls_server_stop(tls_server_t *s);
/* The file "?file" sends from, and the SO_SNDBUF (> 0) of the sockets
 * accepted from now on. */
void tls_server_set(tls_server_t *s, int file_fd, int sndbuf);
/* Wait up to timeout_ms until `n` handlers have finished. */
bool tls_server_wait(tls_server_t *s, int n, int timeout_ms);
int tls_server_count(tls_server_t *s, tls_result_t r);

/* Run a shell command (bounded by `timeout 60`), its stdout and stderr
 * into out; its exit status. */
int tls_run(const char *cmd, char *out, size_t size);
/* tls_client.py against s, trusting ca1, with extra arguments; its output
 * in out. Fails the test unless it exits 0. */
void tls_python(const tls_server_t *s, const char *args, char *out, size_t size);
/* Fails the test unless `what` is in out. */
void tls_has(const char *out, const char *what);
/* A blocking TCP socket connected to the server. */
int tls_tcp_client(const tls_server_t *s);

#endif
