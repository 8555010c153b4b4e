/* Internals of the HTTP client: the connection pool (http_client_pool.c)
 * and the URL parser (http_client.c, shared with ws_client.c). */
#ifndef SP_HTTP_CLIENT_INTERNAL_H
#define SP_HTTP_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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
/* A pooled connection to key that can carry a request, or -1. */
int sp__http_pool_take(sp__http_pool_t *p, const char *key);
/* Keep fd for key (or close it when key has its share already). */
void sp__http_pool_give(sp__http_pool_t *p, const char *key, int fd);

/* A URL's parts. */
typedef struct sp__http_target {
    char key[300];  /* "host:port", "[v6]:port": to resolve, and the pool's key */
    char host[300]; /* the Host header: without the default port */
    const char *path, *query; /* as in the URL; the query with its '?' */
    size_t path_len, query_len;
} sp__http_target_t;

/* "scheme://host[:port]/path?query" (no user info): 0, -EINVAL, or
 * -EPROTONOSUPPORT for another scheme. A query without a path asks for
 * "/?q". */
int sp__http_parse_url(const char *url, const char *scheme, unsigned default_port,
                       sp__http_target_t *t);

#endif
