/* spindled's admin listener: a small HTTP server of its own, on
 * admin.listen only (never one of the public listeners), serving
 *   /metrics       every metric in the Prometheus text format
 *   /status        a short page for people, linking to the others
 *   /debug/fibers  the fibers' dump (?format=json for JSON)
 * Off unless admin.listen is set; checks.c keeps it on loopback unless
 * admin.allow_public. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/daemon.h>
#include <spindle/debug.h>
#include <spindle/metrics.h>
#include <spindle/timer.h>

#include "spindled.h"

static uint64_t started_ns; /* the worker's start, for /status */

/* A page some writer fills: `write` into a memory stream, then the body. */
static int page_answer(sp_http_response_t *res, const char *type,
                       int (*write)(FILE *f, void *arg), void *arg)
{
    char *page = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&page, &len);
    if (!f)
        return -errno;
    int rc = write(f, arg);
    fclose(f);
    if (rc >= 0)
        rc = sp_http_response_add_header(res, "Content-Type", type);
    if (rc == 0)
        rc = sp_http_response_set_body(res, page, len);
    free(page);
    return rc;
}

static int write_metrics(FILE *f, void *arg)
{
    (void)arg;
    return sp_metrics_write(f);
}

static int metrics_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    return page_answer(res, SP_METRICS_CONTENT_TYPE, write_metrics, NULL);
}

static int write_fibers(FILE *f, void *flags)
{
    return sp_fibers_dump(f, *(unsigned *)flags);
}

/* The fibers' dump, grouped by stack; ?format=json for JSON. */
static int fibers_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    const char *format = sp_http_request_param(req, "format");
    unsigned flags = format && strcmp(format, "json") == 0 ? SP_DUMP_JSON : 0;
    return page_answer(res, flags ? "application/json" : "text/plain; charset=utf-8",
                       write_fibers, &flags);
}

static int status_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    const spindled_servers_t *s = arg;
    char body[768];
    snprintf(body, sizeof body,
             "<!doctype html>\n<title>spindled</title>\n<h1>spindled</h1>\n"
             "<p>worker pid %ld, %d threads, up %llu s, %llu restarts before it</p>\n"
             "<ul>\n<li><a href=\"/metrics\">/metrics</a>: metrics, Prometheus text format\n"
             "<li><a href=\"/debug/fibers\">/debug/fibers</a>: the fibers and where they "
             "wait\n</ul>\n",
             (long)getpid(), sp_scheduler_threads(sp_iomanager_scheduler(s->io)),
             (unsigned long long)((sp_now_ns() - started_ns) / 1000000000),
             (unsigned long long)sp_daemon_restarts());
    return app_answer(res, "text/html; charset=utf-8", body);
}


int spindled_admin_create(spindled_servers_t *s)
{
    const char *listen = sp_cvar_string(s->d->v.admin_listen);
    if (!*listen)
        return 0;
    started_ns = sp_now_ns();
    sp_http_router_t *r = s->admin_routes = sp_http_router_create();
    if (!r)
        return -errno;
    sp_http_router_add(r, SP_HTTP_EXACT, "/metrics", SP_HTTP_M_GET, metrics_answer, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/status", SP_HTTP_M_GET, status_answer, s);
    sp_http_router_add(r, SP_HTTP_EXACT, "/debug/fibers", SP_HTTP_M_GET, fibers_answer, NULL);
    /* A few operators and a scraper: a small limit keeps a flood of
     * connections on this port from taking fds the public servers need. */
    sp_http_server_opts_t o = {.max_conns = 64, .no_body = true,
                               .tcp = {.no_reuseport = true}};
    s->admin = sp_http_server_create(s->io, sp_http_router_dispatch, r, &o);
    if (!s->admin)
        return -errno;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s: %s", spindled_name, sp_cvar_name(s->d->v.admin_listen));
    int rc = app_listen_all(&app_http_ops, s->admin, &listen, 1, prefix);
    return rc < 0 ? rc : sp_metrics_add_collector(spindled_collect, s);
}

int spindled_admin_start(spindled_servers_t *s)
{
    int rc = s->admin ? sp_http_server_start(s->admin) : 0;
    if (rc < 0)
        fprintf(stderr, "%s: %s %s: %s\n", spindled_name, sp_cvar_name(s->d->v.admin_listen),
                sp_cvar_string(s->d->v.admin_listen), strerror(-rc));
    return rc;
}

void spindled_admin_stop(spindled_servers_t *s, int64_t drain_us)
{
    if (s->admin)
        sp_http_server_stop(s->admin, drain_us);
}

void spindled_admin_destroy(spindled_servers_t *s)
{
    sp_metrics_remove_collector(spindled_collect, s);
    sp_http_server_destroy(s->admin);
    sp_http_router_destroy(s->admin_routes);
}
