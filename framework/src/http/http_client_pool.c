/* The client's pool of kept-alive connections, per "host:port" and
 * scheme (plain or TLS: http://h:443 and https://h:443 are not the same).
 *
 * A short list under a mutex: taking and giving back are a few pointer
 * moves, never a wait, so a plain mutex is fine between fibers. A taken
 * connection is checked first: a peek that finds EOF (the server closed it
 * while it sat in the pool) or stray bytes means it cannot carry a new
 * request; over TLS that covers the server's close_notify. Connections
 * closed here are closed after the lock is released. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_client_internal.h"
#include "spindle/timer.h"

typedef struct pooled {
    struct pooled *next;
    sp__http_link_t link;
    uint64_t since_ns;
    char key[];
} pooled_t;

void sp__http_pool_init(sp__http_pool_t *p, int max_per_key, int64_t idle_us)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->max_per_key = max_per_key;
    p->idle_ns = (uint64_t)idle_us * 1000u;
}

static void close_all(pooled_t *list)
{
    while (list) {
        pooled_t *next = list->next;
        sp__http_link_close(&list->link, true);
        free(list);
        list = next;
    }
}

void sp__http_pool_destroy(sp__http_pool_t *p)
{
    close_all(p->idle);
    p->idle = NULL;
    pthread_mutex_destroy(&p->lock);
}

/* Still open, nothing unread: a peek would block. */
static bool reusable(int fd)
{
    char x;
    return recv(fd, &x, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

static bool same(const pooled_t *e, const char *key, bool tls)
{
    return (e->link.tls != NULL) == tls && !strcmp(e->key, key);
}

bool sp__http_pool_take(sp__http_pool_t *p, const char *key, bool tls, sp__http_link_t *out)
{
    pooled_t *dead = NULL, **pp = &p->idle;
    uint64_t now = sp_now_ns();
    bool found = false;
    pthread_mutex_lock(&p->lock);
    while (*pp && !found) {
        pooled_t *e = *pp;
        if (!same(e, key, tls)) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        if (now - e->since_ns < p->idle_ns && reusable(e->link.fd)) {
            *out = e->link;
            found = true;
            free(e);
        } else {
            e->next = dead;
            dead = e;
        }
    }
    pthread_mutex_unlock(&p->lock);
    close_all(dead);
    return found;
}

void sp__http_pool_give(sp__http_pool_t *p, const char *key, sp__http_link_t l)
{
    size_t n = strlen(key) + 1;
    pooled_t *e = malloc(sizeof *e + n);
    int kept = 0;
    pthread_mutex_lock(&p->lock);
    for (pooled_t *i = p->idle; i; i = i->next)
        kept += same(i, key, l.tls != NULL);
    if (e && kept < p->max_per_key) {
        *e = (pooled_t){p->idle, l, sp_now_ns()};
        memcpy(e->key, key, n);
        p->idle = e;
        e = NULL;
        l.fd = -1;
    }
    pthread_mutex_unlock(&p->lock);
    free(e);
    if (l.fd >= 0)
        sp__http_link_close(&l, true);
}
