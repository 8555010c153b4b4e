/* The memcached demo (libmemcached); see clients.h. The library uses its
 * ordinary blocking calls (connect, poll, send, recv) and knows nothing of
 * spindle. */
#include "clients.h"
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmemcached/memcached.h>

/* A set and a get of this fiber's own key; mc has the server. */
static bool set_and_get(memcached_st *mc, int index, char *err, size_t errlen)
{
    char key[64], value[64];
    snprintf(key, sizeof key, "spindle:hook-clients:%ld:%d", (long)getpid(), index);
    snprintf(value, sizeof value, "value of fiber %d", index);
    memcached_return_t rc = memcached_set(mc, key, strlen(key), value, strlen(value), 0, 0);
    if (rc != MEMCACHED_SUCCESS) {
        snprintf(err, errlen, "memcached_set: %s", memcached_strerror(mc, rc));
        return false;
    }
    size_t len = 0;
    uint32_t flags = 0;
    char *got = memcached_get(mc, key, strlen(key), &len, &flags, &rc);
    bool ok = got && len == strlen(value) && !memcmp(got, value, len);
    if (!got)
        snprintf(err, errlen, "memcached_get: %s", memcached_strerror(mc, rc));
    else if (!ok)
        snprintf(err, errlen, "memcached_get: '%.*s', not '%s'", (int)len, got, value);
    free(got);
    return ok;
}

static bool memcached_request(const hc_run_t *r, int index, char *err, size_t errlen)
{
    memcached_st *mc = memcached_create(NULL);
    if (!mc) {
        snprintf(err, errlen, "memcached_create: out of memory");
        return false;
    }
    /* Its default 5 s is too short for a slow (sanitizer) build whose
     * server a test keeps stopped for a while. */
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 20000);
    memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, 20000);
    memcached_return_t rc = memcached_server_add(mc, r->host, (in_port_t)r->port);
    bool ok = false;
    if (rc != MEMCACHED_SUCCESS)
        snprintf(err, errlen, "memcached_server_add: %s", memcached_strerror(mc, rc));
    else
        ok = set_and_get(mc, index, err, errlen);
    memcached_free(mc);
    return ok;
}

int hc_memcached_run(const char *host, int port, int fibers,
                     const hc_stall_t *stall, hc_result_t *out)
{
    hc_run_t r = {.request = memcached_request, .host = host, .port = port,
                  .stall = stall, .out = out};
    return hc_run_fibers(&r, fibers);
}
