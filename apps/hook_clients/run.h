/* N fibers on one worker, each making one request: the part every client
 * demo shares (run.c). Private to apps/hook_clients. */
#ifndef HOOK_CLIENTS_RUN_H
#define HOOK_CLIENTS_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "clients.h"

typedef struct hc_run hc_run_t;
/* One request; false with a message in err when it failed. Runs in a
 * fiber; index is the fiber's number, 0 .. fibers - 1. */
typedef bool (*hc_request_fn)(const hc_run_t *r, int index, char *err, size_t errlen);

struct hc_run {
    hc_request_fn request;
    const char *host; /* the server, for the clients that take host + port */
    int port;
    int delay_ms;      /* server-side time of one request, where one asks */
    const char *url;   /* curl */
    const char *ca_file; /* openssl: the CA the server's certificate chains to */
    const hc_stall_t *stall; /* NULL: none */
    hc_result_t *out;
};

/* Run `fibers` requests on a new one-worker IOManager, fill r->out. 0, or
 * -errno when the IOManager could not run them (see r->out->error). */
int hc_run_fibers(const hc_run_t *r, int fibers);

#endif
