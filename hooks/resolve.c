/* Name lookups: getaddrinfo runs on a helper thread.
 *
 * An interrupt or a deadline (task.h) may end the caller's wait while the
 * helper still resolves: the lookup then must not write into the caller's
 * frame, which is gone. So the call is a record of its own, with copies of
 * the arguments and its own result pointer, held by the caller and by the
 * helper; whichever lets go last frees it (and an answer nobody took). */
#include <errno.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hook_internal.h"

typedef struct gai_call {
    char *node, *service; /* copies, or NULL */
    struct addrinfo hints;
    bool has_hints;
    struct addrinfo *res;
    int ret;
    int err;
    _Atomic int refs;
} gai_call_t;

static void gai_unref(gai_call_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->ret == 0 && c->res)
        freeaddrinfo(c->res); /* an answer nobody took */
    free(c->node);
    free(c->service);
    free(c);
}

static void run_gai(void *p)
{
    gai_call_t *c = p;
    c->ret = sp__real()->getaddrinfo(c->node, c->service,
                                     c->has_hints ? &c->hints : NULL, &c->res);
    c->err = errno;
    gai_unref(c);
}

/* The record for a call, with copies of its strings; NULL if out of memory. */
static gai_call_t *gai_new(const char *node, const char *service,
                           const struct addrinfo *hints)
{
    gai_call_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->node = node ? strdup(node) : NULL;
    c->service = service ? strdup(service) : NULL;
    if ((node && !c->node) || (service && !c->service)) {
        free(c->node);
        free(c->service);
        free(c);
        return NULL;
    }
    if (hints) { /* the lookup reads only the flags, family, type, protocol */
        c->hints = (struct addrinfo){.ai_flags = hints->ai_flags,
                                     .ai_family = hints->ai_family,
                                     .ai_socktype = hints->ai_socktype,
                                     .ai_protocol = hints->ai_protocol};
        c->has_hints = true;
    }
    c->ret = EAI_SYSTEM;
    atomic_init(&c->refs, 2); /* the caller's and the helper's */
    return c;
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->getaddrinfo(node, service, hints, res);
    /* On a helper thread: resolver state is per thread there, and a slow
     * DNS answer never stalls this worker. */
    gai_call_t *c = gai_new(node, service, hints);
    if (!c)
        return EAI_MEMORY;
    int rc = b->run_blocking(run_gai, c);
    if (rc <= -SP_HOOK_INTERRUPTED) { /* the helper finishes and frees it */
        gai_unref(c);
        errno = -rc - SP_HOOK_INTERRUPTED;
        return EAI_SYSTEM;
    }
    if (rc < 0) { /* no helper: run_gai never ran */
        atomic_store(&c->refs, 1);
        gai_unref(c);
        errno = -rc;
        return EAI_SYSTEM;
    }
    int ret = c->ret;
    if (ret == 0) {
        *res = c->res;
        c->res = NULL;
    }
    errno = c->err;
    gai_unref(c);
    return ret;
}
