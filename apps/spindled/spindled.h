/* spindled: the configuration variables (main.c), the checks of their
 * values (checks.c) and the worker that runs the servers they describe
 * (worker.c). */
#ifndef SPINDLED_H
#define SPINDLED_H

#include <limits.h>

#include <spindle/config.h>
#include <spindle/http.h>
#include <spindle/metrics.h>
#include <spindle/tcp_server.h>

#include "apps_common.h"

/* Every variable the daemon reads, declared in main.c. */
typedef struct spindled_vars {
    sp_cvar_t *workers, *pid_file, *reuse_port, *daemonize, *supervise, *shutdown_timeout,
        *dump_on_sigquit;
    sp_cvar_t *backoff_min, *backoff_max, *backoff_reset;
    sp_cvar_t *http_enabled, *http_listen, *http_root, *http_keepalive, *http_header,
        *http_body_timeout, *http_send_timeout, *http_handler_deadline, *http_max_body,
        *http_max_conns,
        *http_server_name, *http_access_log, *http_status_route, *http_slow_route,
        *http_ws_echo_route, *http_ws_deflate, *http_redirect_https;
    sp_cvar_t *https_enabled, *https_listen, *https_cert, *https_key, *https_protocols,
        *https_ciphers, *https_ciphersuites, *https_handshake_timeout, *https_ktls;
    sp_cvar_t *echo_enabled, *echo_listen, *echo_max_conns, *echo_idle_timeout,
        *echo_write_timeout;
    sp_cvar_t *admin_listen, *admin_allow_public;
} spindled_vars_t;

typedef struct spindled {
    spindled_vars_t v;
    char config_path[PATH_MAX]; /* absolute (a daemon runs in /); "" = none */
    char root[PATH_MAX];        /* http.root made absolute at start */
    char start_dir[PATH_MAX];   /* where relative paths are taken from */
    char tls_cert[PATH_MAX];    /* https.cert and https.key taken from */
    char tls_key[PATH_MAX];     /* start_dir at start (not resolved: a
                                   renewal may replace a symbolic link) */
} spindled_t;

/* What a worker process runs (worker.c; the admin listener: admin.c). */
typedef struct spindled_servers {
    sp_iomanager_t *io;
    sp_http_router_t *routes;
    sp_http_static_t *files;
    sp_http_server_t *http;
    sp_http_server_t *https; /* NULL unless https.enabled */
    sp_tls_config_t *tls;    /* https's certificate, read again on SIGHUP */
    int https_port;          /* where http.redirect_https sends clients */
    sp_tcp_server_t *echo;
    app_echo_t *echo_service; /* the echo handler and its timeouts */
    sp_http_router_t *admin_routes;
    sp_http_server_t *admin; /* NULL unless admin.listen is set */
    spindled_t *d;
} spindled_servers_t;

extern const char *const spindled_name;

/* Refuse, whenever they are loaded, the values the worker could not use
 * (addresses, paths, the Server header). Call once, after the variables
 * are declared and before the first load; it records the start
 * directory. 0 or a negative errno. */
int spindled_add_checks(spindled_t *d);

/* The rule no single value can check: the HTTP, HTTPS and echo servers
 * (those enabled) listen on no common address. Prints the clash with both
 * sources; 0 or -EINVAL. Checked at start: addresses are only read then. */
int spindled_check_servers(const spindled_t *d);

/* `path` taken from the start directory into buf (an absolute path as
 * it is); NULL when too long. */
const char *spindled_from_start(const spindled_t *d, const char *path, char *buf,
                                size_t size);

/* https.enabled needs https.cert and https.key, and they must make a TLS
 * configuration (read now: OpenSSL's reason is printed); http.redirect_https
 * needs https.enabled. Call after main.c made the paths absolute. Prints
 * why; 0 or -EINVAL. */
int spindled_check_https(const spindled_t *d);

/* HTTPS (https.c). The TLS configuration of the https variables, or NULL
 * with the reason printed on stderr. */
sp_tls_config_t *spindled_tls_config(const spindled_t *d);
/* The handler of http.redirect_https; arg: the spindled_servers_t, whose
 * https_port is set before the HTTP server starts. */
int spindled_redirect(sp_http_request_t *req, sp_http_response_t *res, void *arg);
/* SIGHUP: read the certificate and key files again, and log the result. */
void spindled_tls_reload(spindled_servers_t *s);

/* The admin listener is refused at start on an address other programs
 * on other hosts could reach, unless admin.allow_public, and on one that
 * the HTTP or echo server listens on. Prints why; 0 or -EINVAL. */
int spindled_check_admin(const spindled_t *d);

/* The admin listener (admin.c): /metrics, /status, /debug/fibers on
 * admin.listen, a server of its own. create: nothing when admin.listen is
 * empty; 0 or a negative errno (printed). start after the IOManager. */
int spindled_admin_create(spindled_servers_t *s);
int spindled_admin_start(spindled_servers_t *s);
void spindled_admin_stop(spindled_servers_t *s, int64_t drain_us);
void spindled_admin_destroy(spindled_servers_t *s);

/* The metrics collector of the worker's servers (admin_metrics.c); arg:
 * the spindled_servers_t. */
void spindled_collect(sp_metrics_out_t *out, void *arg);

/* Load the configuration file again and the environment; log problems and
 * keep the old values when it is bad. 0 or a negative errno. */
int spindled_reload(spindled_t *d);

/* The worker process's body (sp_daemon_fn): start the servers, serve until
 * SIGTERM/SIGINT, reload on SIGHUP. Returns the exit status. */
int spindled_worker(void *arg);

#endif
