/* Real client libraries on one spindle worker: N fibers each make one
 * request with the synchronous API of hiredis, libcurl, MariaDB's client or
 * libmemcached, and the hooks turn their blocking calls into parks, so the
 * requests overlap in time.
 *
 * Shared by spindle-hook-clients (apps/hook_clients/main.c) and the
 * tests/test_real_*.c programs. clients.c holds hiredis, libcurl and the
 * HTTP server; client_mariadb.c and client_memcached.c the others, each
 * built only where its library is. */
#ifndef HOOK_CLIENTS_H
#define HOOK_CLIENTS_H

#include <stdbool.h>
#include <stdint.h>

/* What one run of N fibers did. */
typedef struct hc_result {
    int fibers;        /* fibers started */
    int ok;            /* fibers that got the expected answer */
    bool hooked;       /* hooks were present (linked or preloaded) */
    uint64_t wall_ns;  /* first fiber scheduled .. IOManager stopped */
    uint64_t min_ns;   /* fastest single request, as its fiber saw it */
    uint64_t max_ns;   /* slowest single request */
    int peak_in_flight; /* most requests started and not yet finished at once */
    bool stalled;      /* the stall watcher saw every request parked (hc_stall_t) */
    char error[200];   /* the first failure, "" when none */
} hc_result_t;

/* Optional proof of overlap without timing, for a server the caller has
 * stopped (SIGSTOP) before the run: one more fiber on the same worker
 * waits (bounded, 20 s) until every request fiber has started and that
 * many fibers are parked, sets out->stalled, and calls resume(arg), which
 * must let the server go on (SIGCONT). It calls resume also when the wait
 * runs out, with out->stalled false. */
typedef struct hc_stall {
    void (*resume)(void *arg);
    void *arg;
} hc_stall_t;

/* `fibers` fibers on a one-worker IOManager; each does redisConnect(host,
 * port) and BLPOP on a key of its own with a timeout of block_ms, which
 * redis answers with nil after block_ms without blocking other clients.
 * 0, or -errno when the IOManager could not run them (see out->error). */
int hc_redis_run(const char *host, int port, int fibers, int block_ms,
                 hc_result_t *out);

/* `fibers` fibers on a one-worker IOManager; each does curl_easy_perform of
 * url (CURLOPT_NOSIGNAL, no proxy) and expects HTTP 200. Calls
 * curl_global_init the first time. 0 or -errno as above. */
int hc_curl_run(const char *url, int fibers, hc_result_t *out);

/* `fibers` fibers on a one-worker IOManager; each does mysql_real_connect
 * (TCP to host:port as user "root", no password, no database: for a
 * server run with --skip-grant-tables) and SELECT SLEEP(sleep_ms / 1000),
 * and wants the row "0". stall: NULL, or see hc_stall_t. Calls
 * mysql_library_init the first time. 0 or -errno as above. */
int hc_mariadb_run(const char *host, int port, int fibers, int sleep_ms,
                   const hc_stall_t *stall, hc_result_t *out);

/* `fibers` fibers on a one-worker IOManager; each makes a libmemcached
 * handle for host:port, sets a key of its own to a value of its own, gets
 * it back and compares. stall: NULL, or see hc_stall_t. 0 or -errno as
 * above. */
int hc_memcached_run(const char *host, int port, int fibers,
                     const hc_stall_t *stall, hc_result_t *out);

/* `fibers` fibers on a one-worker IOManager; each connects to host:port,
 * runs a TLS handshake with OpenSSL's blocking API (SSL_connect, verifying
 * the server's certificate against ca_file for the name "localhost"),
 * writes "GET / HTTP/1.0" and wants an answer starting "HTTP/1.0 200"
 * (openssl s_server -www). stall: NULL, or see hc_stall_t. 0 or -errno as
 * above. */
int hc_openssl_run(const char *host, int port, const char *ca_file, int fibers,
                   const hc_stall_t *stall, hc_result_t *out);

/* A local HTTP server for the curl demo: on 127.0.0.1, a free port, one
 * plain thread per connection (not a fiber), each answering "200 ok" after
 * delay_ms, so many requests are served at the same time. */
typedef struct hc_http_server hc_http_server_t;

/* NULL + errno on failure. */
hc_http_server_t *hc_http_server_start(int delay_ms);
int hc_http_server_port(const hc_http_server_t *s);
/* Responses sent, once the connections in flight have ended (a bounded
 * wait), and the most connections served at once. */
void hc_http_server_counts(hc_http_server_t *s, unsigned long *served,
                           int *peak);
/* Stop accepting, wait (bounded) for the connections in flight, free. */
void hc_http_server_stop(hc_http_server_t *s);

/* Milliseconds, for printing. */
double hc_ms(uint64_t ns);

#endif
