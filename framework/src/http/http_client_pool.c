/* The client's pool of kept-alive connections, per "host:port".
 *
 * A short list under a mutex: taking and giving back are a few pointer
 * moves, never a wait, so a plain mutex is fine between fibers. A taken
 * connection is checked first: a peek that finds EOF (the server closed it
 * while it sat in the pool) or stray bytes means it cannot carry a new
 * request. Connections closed here are closed after the lock is released. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_client_internal.h"
#include "spindle/timer.h"

typedef struct pooled {
    struct pooled *next;
    int fd;
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
        sp_io_close(list->fd);
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

int sp__http_pool_take(sp__http_pool_t *p, const char *key)
{
    pooled_t *dead = NULL, **pp = &p->idle;
    uint64_t now = sp_now_ns();
    int fd = -1;
    pthread_mutex_lock(&p->lock);
    while (*pp && fd < 0) {
        pooled_t *e = *pp;
        if (strcmp(e->key, key)) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        if (now - e->since_ns < p->idle_ns && reusable(e->fd)) {
            fd = e->fd;
            free(e);
        } else {
            e->next = dead;
            dead = e;
        }
    }
    pthread_mutex_unlock(&p->lock);
    close_all(dead);
    return fd;
}

void sp__http_pool_give(sp__http_pool_t *p, const char *key, int fd)
{
    size_t n = strlen(key) + 1;
    pooled_t *e = malloc(sizeof *e + n);
    int same = 0;
    pthread_mutex_lock(&p->lock);
    for (pooled_t *i = p->idle; i; i = i->next)
        same += !strcmp(i->key, key);
    if (e && same < p->max_per_key) {
        *e = (pooled_t){p->idle, fd, sp_now_ns()};
        memcpy(e->key, key, n);
        p->idle = e;
        e = NULL;
        fd = -1;
    }
    pthread_mutex_unlock(&p->lock);
    free(e);
    if (fd >= 0)
        sp_io_close(fd);
}
