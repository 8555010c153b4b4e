/* Name lookups: getaddrinfo runs on a helper thread. */
#include <errno.h>
#include <netdb.h>

#include "hook_internal.h"

typedef struct gai_call {
    const char *node, *service;
    const struct addrinfo *hints;
    struct addrinfo **res;
    int ret;
    int err;
} gai_call_t;

static void run_gai(void *p)
{
    gai_call_t *c = p;
    c->ret = sp__real()->getaddrinfo(c->node, c->service, c->hints, c->res);
    c->err = errno;
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->getaddrinfo(node, service, hints, res);
    /* On a helper thread: resolver state is per thread there, and a slow
     * DNS answer never stalls this worker. */
    gai_call_t c = {node, service, hints, res, EAI_SYSTEM, 0};
    int rc = b->run_blocking(run_gai, &c);
    if (rc < 0) {
        errno = -rc;
        return EAI_SYSTEM;
    }
    errno = c.err;
    return c.ret;
}
