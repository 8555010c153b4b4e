/* Internals of the HTTP and WebSocket clients: the connection pool
 * (http_client_pool.c), the URL parser and the dialer (http_client_dial.c,
 * shared with ws_client.c). */
#ifndef SP_HTTP_CLIENT_INTERNAL_H
#define SP_HTTP_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle/tls.h"

/* A client's connection: the socket and, for https:// and wss://, the TLS
 * session over it. */
typedef struct sp__http_link {
    int fd;
    sp_tls_conn_t *tls; /* NULL: plain TCP */
} sp__http_link_t;

/* Free the TLS session (after a close_notify when `notify`: sent without
 * waiting, best effort) and close the socket. */
void sp__http_link_close(sp__http_link_t *l, bool notify);

typedef struct pooled pooled_t;

typedef struct sp__http_pool {
    pthread_mutex_t lock;
    pooled_t *idle; /* most recently given back first */
    int max_per_key;
    uint64_t idle_ns;
} sp__http_pool_t;

void sp__http_pool_init(sp__http_pool_t *p, int max_per_key, int64_t idle_us);
/* Close every pooled connection. */
void sp__http_pool_destroy(sp__http_pool_t *p);
/* A pooled connection to key, over TLS or not as `tls` says, that can
 * carry a request: true and *out, or false. */
bool sp__http_pool_take(sp__http_pool_t *p, const char *key, bool tls, sp__http_link_t *out);
/* Keep l for key (or close it when key has its share already). */
void sp__http_pool_give(sp__http_pool_t *p, const char *key, sp__http_link_t l);

/* A URL's parts. */
typedef struct sp__http_target {
    char key[300];  /* "host:port", "[v6]:port": to resolve, and the pool's key */
    char host[300]; /* the Host header: without the scheme's default port */
    char name[256]; /* the host alone ("::1" without brackets): TLS checks it */
    bool tls;       /* https://, wss:// */
    const char *path, *query; /* as in the URL; the query with its '?' */
    size_t path_len, query_len;
} sp__http_target_t;

/* "scheme://host[:port]/path?query" (no user info) where scheme is
 * `plain` (default port 80) or `plain` + "s" (over TLS, port 443): 0,
 * -EINVAL, or -EPROTONOSUPPORT for another scheme. A query without a path
 * asks for "/?q". */
int sp__http_parse_url(const char *url, const char *plain, sp__http_target_t *t);

/* Connect to t, and over TLS do the handshake with cfg (NULL: the
 * process's default client config, the system store, made on first use),
 * all within timeout_us (< 0: none) and by until_ns (0: none). 0 and *out,
 * or -errno (SP_TLS_EVERIFY, SP_TLS_EHANDSHAKE from the handshake). */
int sp__http_dial(const sp__http_target_t *t, sp_tls_config_t *cfg, int64_t timeout_us,
                  uint64_t until_ns, sp__http_link_t *out);

#endif
