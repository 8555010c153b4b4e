/* The HTTP server: options with their defaults, and a TCP server whose
 * connection handler is the HTTP connection loop (http_conn.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

static void fill_size(size_t *v, size_t def)
{
    if (*v == 0)
        *v = def;
}

static void fill_us(int64_t *v, int64_t def)
{
    if (*v == 0)
        *v = def;
}

enum { BUSY_BAND = 16 };

/* Over max_conns a connection is still accepted, to be answered 503; the
 * TCP server's own limit, an eighth and BUSY_BAND higher, bounds those
 * connections too (both stay under the open-file limit with the defaults).
 * None is stored as INT_MAX, a count never reached. */
static void fill_conns(sp_http_server_opts_t *o)
{
    if (o->max_conns == 0)
        o->max_conns = sp_tcp_default_max_conns();
    else if (o->max_conns < 0)
        o->max_conns = INT_MAX;
    if (o->tcp.max_conns == 0) {
        long long tcp = (long long)o->max_conns + o->max_conns / 8 + BUSY_BAND;
        o->tcp.max_conns = tcp > INT_MAX ? INT_MAX : (int)tcp;
    }
}

static void fill_defaults(sp_http_server_opts_t *o)
{
    fill_size(&o->max_request_line, SP_HTTP_DEFAULT_MAX_REQUEST_LINE);
    fill_size(&o->max_header_size, SP_HTTP_DEFAULT_MAX_HEADER_SIZE);
    if (o->no_body)
        o->max_body = 0; /* the parser's limit: any body byte is over it */
    else
        fill_size(&o->max_body, SP_HTTP_DEFAULT_MAX_BODY);
    if (o->max_headers <= 0)
        o->max_headers = SP_HTTP_DEFAULT_MAX_HEADERS;
    fill_us(&o->header_timeout_us, SP_HTTP_DEFAULT_HEADER_TIMEOUT_US);
    fill_us(&o->keepalive_timeout_us, SP_HTTP_DEFAULT_KEEPALIVE_TIMEOUT_US);
    fill_us(&o->body_timeout_us, SP_HTTP_DEFAULT_BODY_TIMEOUT_US);
    fill_us(&o->send_timeout_us, SP_HTTP_DEFAULT_SEND_TIMEOUT_US);
    fill_us(&o->body_deadline_us, SP_HTTP_DEFAULT_BODY_DEADLINE_US);
    fill_size(&o->max_buffered_bodies, SP_HTTP_DEFAULT_BUFFERED_BODIES * o->max_body);
    fill_conns(o);
    /* Answers are written whole; Nagle would only delay the last piece of
     * a streamed one. */
    o->tcp.nodelay = true;
}

int sp_http_server_check_name(const char *name)
{
    if (!sp__http_field_value_ok(name))
        return -EINVAL;
    return strlen(name) <= SP_HTTP_SERVER_NAME_MAX ? 0 : -ENAMETOOLONG;
}

static int server_line(sp_http_server_t *srv, const char *name)
{
    if (!name)
        name = "spindle";
    int rc = sp_http_server_check_name(name);
    if (rc == 0 && *name)
        snprintf(srv->server_line, sizeof srv->server_line, "Server: %s\r\n", name);
    return rc;
}

void sp_http_server_set_timeouts(sp_http_server_t *srv, int64_t header_timeout_us,
                                 int64_t keepalive_timeout_us)
{
    fill_us(&header_timeout_us, SP_HTTP_DEFAULT_HEADER_TIMEOUT_US);
    fill_us(&keepalive_timeout_us, SP_HTTP_DEFAULT_KEEPALIVE_TIMEOUT_US);
    atomic_store(&srv->header_timeout_us, header_timeout_us);
    atomic_store(&srv->keepalive_timeout_us, keepalive_timeout_us);
}

sp_http_server_t *sp_http_server_create(sp_iomanager_t *io, sp_http_handler_fn handler,
                                        void *arg, const sp_http_server_opts_t *opts)
{
    if (!io || !handler) {
        errno = EINVAL;
        return NULL;
    }
    sp_http_server_t *srv = calloc(1, sizeof *srv);
    if (!srv) {
        errno = ENOMEM;
        return NULL;
    }
    if (opts)
        srv->opts = *opts;
    fill_defaults(&srv->opts);
    static _Atomic unsigned ids;
    srv->id = atomic_fetch_add(&ids, 1) + 1;
    srv->handler = handler;
    srv->arg = arg;
    atomic_init(&srv->header_timeout_us, srv->opts.header_timeout_us);
    atomic_init(&srv->keepalive_timeout_us, srv->opts.keepalive_timeout_us);
    pthread_mutex_init(&srv->lock, NULL);
    int rc = sp__slots_init(&srv->n, SP__HS_COUNT);
    if (rc == 0)
        rc = server_line(srv, srv->opts.server_name);
    srv->opts.server_name = NULL; /* the caller's string is not kept */
    if (rc == 0 && srv->opts.access_log && !(srv->access = sp_logger("http.access")))
        rc = -errno;
    if (rc == 0 && !(srv->tcp = sp_tcp_server_create(io, sp__http_serve, srv, &srv->opts.tcp)))
        rc = -errno;
    if (rc < 0) {
        sp_http_server_destroy(srv);
        errno = -rc;
        return NULL;
    }
    return srv;
}

int sp_http_server_listen(sp_http_server_t *srv, const sp_addr_t *addr)
{
    return sp_tcp_server_listen(srv->tcp, addr);
}

int sp_http_server_naddrs(const sp_http_server_t *srv)
{
    return sp_tcp_server_naddrs(srv->tcp);
}

int sp_http_server_addr(const sp_http_server_t *srv, int i, sp_addr_t *out)
{
    return sp_tcp_server_addr(srv->tcp, i, out);
}

int sp_http_server_start(sp_http_server_t *srv)
{
    return sp_tcp_server_start(srv->tcp);
}

int sp_http_server_stop(sp_http_server_t *srv, int64_t drain_us)
{
    atomic_store(&srv->stopping, true);
    sp__http_close_idle(srv);
    return sp_tcp_server_stop(srv->tcp, drain_us);
}

int sp_http_server_stats(const sp_http_server_t *srv, sp_http_server_stats_t *out)
{
    const sp__slots_t *n = &srv->n;
    *out = (sp_http_server_stats_t){
        .connections = sp__slots_sum(n, SP__HS_CONNS),
        .bad_requests = sp__slots_sum(n, SP__HS_BAD),
        .handler_errors = sp__slots_sum(n, SP__HS_HANDLER_ERRORS),
        .busy = sp__slots_sum(n, SP__HS_BUSY),
        .body_bytes = atomic_load(&srv->body_bytes),
        .bytes_in = sp__slots_sum(n, SP__HS_BYTES_IN),
        .bytes_out = sp__slots_sum(n, SP__HS_BYTES_OUT),
        .active = (uint64_t)atomic_load(&srv->conns),
        .idle = sp__http_count_idle((sp_http_server_t *)srv),
        .latency_sum_us = sp__slots_sum(n, SP__HS_LATENCY_SUM) / 1000,
    };
    for (int i = 0; i < 5; i++) {
        out->status[i] = sp__slots_sum(n, SP__HS_STATUS + i);
        out->requests += out->status[i];
    }
    for (int i = 0; i < SP_HTTP_LIMITS; i++)
        out->limits[i] = sp__slots_sum(n, SP__HS_LIMIT + i);
    for (int i = 0; i <= SP_HTTP_LATENCY_BUCKETS; i++)
        out->latency[i] = sp__slots_sum(n, SP__HS_LATENCY + i);
    return 0;
}

int sp_http_server_addr_stats(const sp_http_server_t *srv, int i, sp_tcp_server_stats_t *out)
{
    return sp_tcp_server_addr_stats(srv->tcp, i, out);
}

void sp_http_server_destroy(sp_http_server_t *srv)
{
    if (!srv)
        return;
    sp_tcp_server_destroy(srv->tcp);
    sp__slots_free(&srv->n);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}
