/* spindled's worker process: the HTTP, HTTPS and echo servers of the
 * configuration, one IOManager for all, and the signal loop.
 *
 * Signals are blocked in every thread (the IOManager's workers inherit the
 * mask set before they start) and taken here with sigwait: stopping and
 * reloading run as plain code in this thread, never in a handler. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/daemon.h>
#include <spindle/debug.h>
#include <spindle/http.h>
#include <spindle/log.h>
#include <spindle/tcp_server.h>
#include <spindle/timer.h>

#include "spindled.h"

/* /slow sleeps at most this long: a test route, not a way to pin fibers. */
enum { SLOW_MAX_MS = 60000 };

/* /slow requests in progress, shown by /status: tests wait for their slow
 * requests to be in progress before they stop or reload the daemon. */
static atomic_int slow_active;

typedef spindled_servers_t servers_t;

/* ---- routes ---------------------------------------------------------------- */

/* The worker's pid (tests kill it to see the supervisor restart it), the
 * live keep-alive timeout (tests see a reload take effect), and what the
 * log lost (a full disk shows here even when the log cannot say it). */
static int status_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    const spindled_t *d = arg;
    sp_log_stats_t log;
    sp_log_stats(&log);
    char body[320];
    snprintf(body, sizeof body,
             "{\"pid\":%ld,\"keepalive_timeout_ms\":%lld,\"slow_active\":%d,"
             "\"log_dropped\":%llu,\"log_lost\":%llu,\"log_write_errors\":%llu,"
             "\"log_last_error\":\"%s\"}",
             (long)getpid(), (long long)(sp_cvar_duration(d->v.http_keepalive) / 1000),
             atomic_load(&slow_active), (unsigned long long)log.dropped,
             (unsigned long long)log.lost, (unsigned long long)log.write_errors,
             log.last_error ? strerror(log.last_error) : "");
    return app_answer(res, "application/json", body);
}

/* Answers after ?ms=N milliseconds: a request that is in progress for a
 * while, to see graceful stops and reloads wait for it. A sleep cut by
 * http.handler_deadline fails the request (504). */
static int slow_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    const char *ms = sp_http_request_param(req, "ms");
    long n = ms ? strtol(ms, NULL, 10) : 0;
    n = n < 0 ? 0 : n > SLOW_MAX_MS ? SLOW_MAX_MS : n;
    atomic_fetch_add(&slow_active, 1);
    int rc = sp_sleep_us((uint64_t)n * 1000);
    atomic_fetch_sub(&slow_active, 1);
    if (rc == -ETIMEDOUT)
        return rc;
    return app_answer(res, "text/plain", "slow done\n");
}

static sp_http_router_t *make_routes(spindled_t *d, sp_http_static_t **files)
{
    sp_http_router_t *r = sp_http_router_create();
    if (!r)
        return NULL;
    app_add_hello_routes(r);
    /* Off unless enabled: /status shows internals, and /slow and /echo let
     * anyone hold a fiber and a connection for a minute. */
    if (sp_cvar_bool(d->v.http_status_route))
        sp_http_router_add(r, SP_HTTP_EXACT, "/status", SP_HTTP_M_GET, status_answer, d);
    if (sp_cvar_bool(d->v.http_slow_route))
        sp_http_router_add(r, SP_HTTP_EXACT, "/slow", SP_HTTP_M_GET, slow_answer, NULL);
    if (sp_cvar_bool(d->v.http_ws_echo_route))
        app_add_ws_echo(r, "/echo", sp_cvar_bool(d->v.http_ws_deflate));
    if (*d->root) {
        if (!(*files = sp_http_static_create(d->root, NULL)))
            return r; /* the caller sees *files NULL with a root: fails */
        sp_http_router_set_default(r, sp_http_static_handler, *files);
    }
    return r;
}

/* ---- servers --------------------------------------------------------------- */

static int64_t ms(const sp_cvar_t *v)
{
    return sp_cvar_duration(v) / 1000;
}

static sp_http_server_opts_t http_opts(const spindled_vars_t *v)
{
    int64_t keepalive = sp_cvar_duration(v->http_keepalive);
    int64_t max_body = (int64_t)sp_cvar_size(v->http_max_body);
    return (sp_http_server_opts_t){
        /* 0 in the file means "no body"; 0 in opts means the default */
        .max_body = (size_t)max_body,
        .no_body = max_body == 0,
        .header_timeout_us = sp_cvar_duration(v->http_header),
        /* 0 in the file means "close at once"; 0 in opts means the default */
        .keepalive_timeout_us = keepalive ? keepalive : 1,
        .body_timeout_us = sp_cvar_duration(v->http_body_timeout),
        .send_timeout_us = sp_cvar_duration(v->http_send_timeout),
        /* 0 means none in both */
        .handler_deadline_us = sp_cvar_duration(v->http_handler_deadline),
        .max_conns = (int)sp_cvar_int(v->http_max_conns),
        .server_name = sp_cvar_string(v->http_server_name),
        .access_log = sp_cvar_bool(v->http_access_log),
        .tcp = {.no_reuseport = !sp_cvar_bool(v->reuse_port)},
    };
}

/* Listen on every address of a list variable; 0 or the first error. */
static int listen_all(const sp_cvar_t *list, const app_server_ops_t *ops, void *srv)
{
    const sp_strlist_t *l = sp_cvar_list(list);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s: %s", spindled_name, sp_cvar_name(list));
    return app_listen_all(ops, srv, l->items, l->n, prefix);
}

/* The routes both web servers serve; made once, for the first of them. */
static int routes(servers_t *s)
{
    if (!s->routes)
        s->routes = make_routes(s->d, &s->files);
    return !s->routes || (*s->d->root && !s->files) ? -errno : 0;
}

static int create_http(servers_t *s)
{
    spindled_vars_t *v = &s->d->v;
    if (!sp_cvar_bool(v->http_enabled))
        return 0;
    sp_http_server_opts_t o = http_opts(v);
    if (sp_cvar_bool(v->http_redirect_https))
        s->http = sp_http_server_create(s->io, spindled_redirect, s, &o);
    else if (routes(s) == 0)
        s->http = sp_http_server_create(s->io, sp_http_router_dispatch, s->routes, &o);
    if (!s->http)
        return -errno;
    return listen_all(v->http_listen, &app_http_ops, s->http);
}

static int create_https(servers_t *s)
{
    spindled_vars_t *v = &s->d->v;
    if (!sp_cvar_bool(v->https_enabled))
        return 0;
    int rc = routes(s);
    if (rc < 0)
        return rc;
    if (!(s->tls = spindled_tls_config(s->d)))
        return -errno;
    sp_http_server_opts_t o = http_opts(v);
    o.tls = s->tls;
    if (!(s->https = sp_http_server_create(s->io, sp_http_router_dispatch, s->routes, &o)))
        return -errno;
    return listen_all(v->https_listen, &app_http_ops, s->https);
}

/* The port of the HTTPS server's first TCP address (port 0 in the file:
 * the one the kernel chose), for http.redirect_https. */
static int https_port(const servers_t *s)
{
    for (int i = 0; s->https && i < app_http_ops.naddrs(s->https); i++) {
        sp_addr_t a;
        if (app_http_ops.addr(s->https, i, &a) == 0 && sp_addr_port(&a) > 0)
            return sp_addr_port(&a);
    }
    return 443;
}

static int create_echo(servers_t *s)
{
    spindled_vars_t *v = &s->d->v;
    if (!sp_cvar_bool(v->echo_enabled))
        return 0;
    sp_tcp_server_opts_t o = {.max_conns = (int)sp_cvar_int(v->echo_max_conns),
                              .nodelay = true,
                              .no_reuseport = !sp_cvar_bool(v->reuse_port)};
    s->echo_service = app_echo_create(s->io, ms(v->echo_idle_timeout),
                                      ms(v->echo_write_timeout));
    if (!s->echo_service ||
        !(s->echo = sp_tcp_server_create(s->io, app_echo, s->echo_service, &o)))
        return -errno;
    return listen_all(v->echo_listen, &app_tcp_ops, s->echo);
}

/* The servers bind at start: an error names the list it came from. */
static int bind_failed(int rc, const sp_cvar_t *list)
{
    const sp_strlist_t *l = sp_cvar_list(list);
    fprintf(stderr, "%s: %s [", spindled_name, sp_cvar_name(list));
    for (size_t i = 0; i < l->n; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", l->items[i]);
    fprintf(stderr, "]: %s\n", strerror(-rc));
    return rc;
}

static int start(servers_t *s)
{
    const spindled_vars_t *v = &s->d->v;
    int rc = sp_iomanager_start(s->io);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", spindled_name, strerror(-rc));
        return rc;
    }
    /* HTTPS first: a redirect names its port. */
    if (s->https && (rc = sp_http_server_start(s->https)) < 0)
        return bind_failed(rc, v->https_listen);
    s->https_port = https_port(s);
    if (s->http && (rc = sp_http_server_start(s->http)) < 0)
        return bind_failed(rc, v->http_listen);
    if (s->echo && (rc = sp_tcp_server_start(s->echo)) < 0)
        return bind_failed(rc, v->echo_listen);
    if ((rc = spindled_admin_start(s)) < 0)
        return rc;
    app_print_all(&app_http_ops, s->http, "http");
    app_print_all(&app_http_ops, s->https, "https");
    app_print_all(&app_tcp_ops, s->echo, "echo");
    app_print_all(&app_http_ops, s->admin, "admin");
    fflush(stdout);
    /* Before "worker pid": whoever reads that line (a test) knows the
     * supervisor will count this worker as started. */
    sp_daemon_ready();
    printf("worker pid %ld\n", (long)getpid());
    fflush(stdout);
    return 0;
}

static int64_t now_us(void)
{
    return (int64_t)(sp_now_ns() / 1000);
}

static int64_t us_until(int64_t deadline)
{
    int64_t left = deadline - now_us();
    return left > 0 ? left : 0;
}

static void stop_and_destroy(servers_t *s)
{
    /* One shutdown_timeout for all servers, not one each. */
    int64_t deadline = now_us() + sp_cvar_duration(s->d->v.shutdown_timeout);
    if (s->http)
        sp_http_server_stop(s->http, us_until(deadline));
    if (s->https)
        sp_http_server_stop(s->https, us_until(deadline));
    if (s->echo)
        sp_tcp_server_stop(s->echo, us_until(deadline));
    spindled_admin_stop(s, us_until(deadline));
    sp_iomanager_stop(s->io);
    spindled_admin_destroy(s);
    sp_http_server_destroy(s->http);
    sp_http_server_destroy(s->https);
    sp_tls_config_free(s->tls);
    sp_tcp_server_destroy(s->echo);
    sp_iomanager_destroy(s->io);
    app_echo_destroy(s->echo_service);
    sp_http_router_destroy(s->routes);
    sp_http_static_destroy(s->files);
}

/* ---- the signal loop -------------------------------------------------------- */

static void reload(servers_t *s)
{
    const spindled_vars_t *v = &s->d->v;
    bool ok = spindled_reload(s->d) == 0;
    int64_t keepalive = sp_cvar_duration(v->http_keepalive);
    sp_http_server_t *web[] = {s->http, s->https};
    for (int i = 0; ok && i < 2; i++)
        if (web[i])
            sp_http_server_set_timeouts(web[i], sp_cvar_duration(v->http_header),
                                        keepalive ? keepalive : 1);
    /* The certificate even when the file was bad: a renewal must not wait
     * for a mistake elsewhere to be fixed. */
    spindled_tls_reload(s);
    if (ok && s->echo_service)
        app_echo_set_timeouts(s->echo_service, ms(v->echo_idle_timeout),
                              ms(v->echo_write_timeout));
    int rc = sp_log_reopen();
    if (rc < 0)
        SP_LOG_ERROR(sp_logger("spindled"), "reopening log files: %s", strerror(-rc));
}

/* spindle.dump_on_sigquit: a thread of the library's makes the dump (this
 * one sits in sp_daemon_wait_signal) and writes it to the configured log
 * (logger spindle.fibers, WARN); a failure is told, not fatal. */
static void dump_on_sigquit(const spindled_t *d)
{
    int rc = 0;
    if (sp_cvar_bool(d->v.dump_on_sigquit))
        rc = sp_fibers_dump_on_signal_to_log(SIGQUIT, NULL, SP_LEVEL_WARN);
    if (rc < 0)
        fprintf(stderr, "%s: fiber dumps on SIGQUIT: %s\n", spindled_name,
                strerror(-rc));
}

int spindled_worker(void *arg)
{
    sp_daemon_block_signals(); /* before any thread starts: all inherit it */
    signal(SIGPIPE, SIG_IGN);
    servers_t s = {.d = arg};
    dump_on_sigquit(s.d);
    int workers = (int)sp_cvar_int(s.d->v.workers);
    int rc = (s.io = sp_iomanager_create("spindled", workers, false)) ? 0 : -errno;
    if (rc == 0)
        rc = create_https(&s);
    if (rc == 0)
        rc = create_http(&s);
    if (rc == 0)
        rc = create_echo(&s);
    if (rc == 0)
        rc = spindled_admin_create(&s);
    if (rc == 0)
        rc = start(&s);
    if (rc < 0) {
        /* The process ends here: nothing to drain, and the exit status
         * tells the supervisor to try again later. */
        fprintf(stderr, "%s: cannot start: %s\n", spindled_name, strerror(-rc));
        return 1;
    }
    int sig;
    while ((sig = sp_daemon_wait_signal()) == SIGHUP)
        reload(&s);
    SP_LOG_INFO(sp_logger("spindled"), "stopping (%s)", strsignal(sig));
    stop_and_destroy(&s);
    return 0;
}
