/* spindle-httpd: the HTTP server on the framework.
 *
 *   spindle-httpd --listen 127.0.0.1:8080 [--listen ADDR]... [--workers N]
 *                 [--root DIR] [--max-conns N] [--access-log] [--server NAME]
 *                 [--ws-echo PATH [--ws-deflate]] [--tls-cert PEM --tls-key PEM
 *                 [--tls-ciphersuites LIST] [--tls-ktls]]
 *
 * GET /plaintext answers "Hello, World!" (text/plain), GET /json answers
 * {"message":"Hello, World!"} (application/json); with --root every other
 * path is a file under DIR. --ws-echo PATH makes PATH a WebSocket endpoint
 * that sends every message back; --ws-deflate lets it accept
 * permessage-deflate. --tls-cert and --tls-key (PEM files; the
 * certificate file may hold its chain) make it an HTTPS server (TLS 1.2
 * and 1.3, ALPN http/1.1: docs/tls.md); --tls-ciphersuites limits TLS 1.3's
 * suites (OpenSSL syntax); --tls-ktls asks for kernel TLS for static files
 * (logged once at start: on, or unavailable and why). --access-log writes one line per request to
 * stderr (the "http.access" logger). Prints "listening on ADDR" for each
 * address (port 0 shows the port the kernel chose). SIGINT/SIGTERM stop it
 * gracefully: no new connections, idle ones closed, requests in progress
 * get 5 s to finish, then exit 0. It stays in the foreground. --workers
 * counts the main thread, which serves too: with 1 the process is
 * single-threaded.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tls.h>

#include "apps_common.h"

enum { MAX_LISTEN = 8 };

typedef struct args {
    const char *listen[MAX_LISTEN];
    int nlisten, workers, max_conns;
    const char *root, *server, *ws_echo, *tls_cert, *tls_key, *tls_suites;
    bool access_log, ws_deflate, tls_ktls;
} args_t;

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --listen ADDR [--listen ADDR]... [--workers N] [--root DIR]\n"
            "          [--max-conns N] [--access-log] [--server NAME]\n"
            "          [--ws-echo PATH [--ws-deflate]]\n"
            "          [--tls-cert PEM --tls-key PEM [--tls-ciphersuites LIST] [--tls-ktls]]\n"
            "  ADDR: 127.0.0.1:8080, [::1]:8080, unix:/path\n"
            "  N: --workers >= 1 (threads, the main one included); --max-conns >= 0 (0: no limit;\n"
            "     default: from the open-file limit)\n",
            argv0);
    exit(2);
}

static void parse_args(int argc, char **argv, args_t *a)
{
    *a = (args_t){.workers = 1};
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc, ok = true;
        if (!strcmp(argv[i], "--listen") && more && a->nlisten < MAX_LISTEN)
            a->listen[a->nlisten++] = argv[++i];
        else if (!strcmp(argv[i], "--workers") && more)
            ok = app_parse_int(argv[++i], 1, INT_MAX, &a->workers);
        else if (!strcmp(argv[i], "--max-conns") && more)
            ok = app_parse_max_conns(argv[++i], &a->max_conns);
        else if (!strcmp(argv[i], "--root") && more)
            a->root = argv[++i];
        else if (!strcmp(argv[i], "--server") && more)
            a->server = argv[++i];
        else if (!strcmp(argv[i], "--ws-echo") && more)
            a->ws_echo = argv[++i];
        else if (!strcmp(argv[i], "--ws-deflate"))
            a->ws_deflate = true;
        else if (!strcmp(argv[i], "--tls-cert") && more)
            a->tls_cert = argv[++i];
        else if (!strcmp(argv[i], "--tls-key") && more)
            a->tls_key = argv[++i];
        else if (!strcmp(argv[i], "--tls-ciphersuites") && more)
            a->tls_suites = argv[++i];
        else if (!strcmp(argv[i], "--tls-ktls"))
            a->tls_ktls = true;
        else if (!strcmp(argv[i], "--access-log"))
            a->access_log = true;
        else
            ok = false;
        if (!ok)
            usage(argv[0]);
    }
    if (!a->nlisten || !a->tls_cert != !a->tls_key ||
        ((a->tls_suites || a->tls_ktls) && !a->tls_cert))
        usage(argv[0]);
}

/* --tls-cert/--tls-key: the HTTPS server's config, or NULL without them. */
static sp_tls_config_t *make_tls(const args_t *a)
{
    if (!a->tls_cert)
        return NULL;
    sp_tls_cert_t cert = {a->tls_cert, a->tls_key};
    const char *alpn[] = {"http/1.1"};
    sp_tls_server_opts_t o = {.certs = &cert, .ncerts = 1, .alpn = alpn, .nalpn = 1,
                              .ciphersuites = a->tls_suites, .ktls = a->tls_ktls};
    sp_tls_config_t *cfg = sp_tls_server_config(&o);
    if (!cfg) {
        fprintf(stderr, "spindle-httpd: --tls-cert %s --tls-key %s: %s (%s)\n", a->tls_cert,
                a->tls_key, strerror(errno), sp_tls_error_reason());
        exit(2);
    }
    return cfg;
}

static sp_http_router_t *make_routes(const args_t *a, sp_http_static_t **st)
{
    sp_http_router_t *r = sp_http_router_create();
    if (!r)
        return NULL;
    app_add_hello_routes(r);
    if (a->ws_echo && app_add_ws_echo(r, a->ws_echo, a->ws_deflate) < 0) {
        fprintf(stderr, "spindle-httpd: --ws-echo %s: cannot add it\n", a->ws_echo);
        exit(2);
    }
    *st = NULL;
    if (a->root) {
        if (!(*st = sp_http_static_create(a->root, NULL))) {
            fprintf(stderr, "spindle-httpd: --root %s: %s\n", a->root, strerror(errno));
            exit(2);
        }
        sp_http_router_set_default(r, sp_http_static_handler, *st);
    }
    return r;
}

int main(int argc, char **argv)
{
    args_t a;
    parse_args(argc, argv, &a);

    sigset_t stop_signals;
    app_block_stop_signals(&stop_signals);

    sp_http_static_t *st = NULL;
    sp_http_router_t *routes = make_routes(&a, &st);
    sp_tls_config_t *tls = make_tls(&a);
    sp_iomanager_t *io = sp_iomanager_create("httpd", a.workers, true);
    if (!routes || !io) {
        perror("spindle-httpd");
        return 1;
    }
    sp_http_server_opts_t opts = {.max_conns = a.max_conns,
                                  .server_name = a.server,
                                  .access_log = a.access_log,
                                  .tls = tls};
    sp_http_server_t *srv = sp_http_server_create(io, sp_http_router_dispatch, routes, &opts);
    if (!srv) {
        perror("spindle-httpd: server");
        return 1;
    }
    int sig;
    int status = app_serve(&app_http_ops, srv, io, a.listen, (size_t)a.nlisten,
                           "spindle-httpd:", &stop_signals, 5 * 1000000, &sig);
    if (status)
        return status;
    sp_http_server_stats_t s;
    sp_http_server_stats(srv, &s);
    fprintf(stderr, "spindle-httpd: stopped (%s); %llu connections, %llu requests\n",
            strsignal(sig), (unsigned long long)s.connections, (unsigned long long)s.requests);
    sp_http_server_destroy(srv);
    sp_iomanager_destroy(io);
    sp_http_router_destroy(routes);
    sp_http_static_destroy(st);
    sp_tls_config_free(tls);
    return 0;
}
