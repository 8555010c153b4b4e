/* spindled: the config-driven daemon.
 *
 *   spindled -c conf/spindle.yml [-d] [-s key=value]... [--print-config]
 *
 * Serves what the configuration lists: an HTTP server (/plaintext, /json,
 * a static root, and when enabled /status and /slow?ms=N), the same routes
 * over TLS (https, when enabled), an echo server and, when admin.listen is set, an admin listener (/metrics,
 * /status, /debug/fibers). -d detaches;
 * a supervisor process restarts the worker when it dies (spindle/daemon.h).
 * SIGTERM/SIGINT stop gracefully, SIGHUP reloads the configuration, reads
 * the HTTPS certificate again and reopens log files. --print-config prints every variable, its value and
 * where it came from, then exits. docs/daemon.md has the details and
 * conf/spindle.example.yml every option.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/daemon.h>
#include <spindle/log.h>

#include "spindled.h"

const char *const spindled_name = "spindled";

static void usage(void)
{
    fprintf(stderr, "usage: %s [-c FILE] [-d] [-s key=value]... [--print-config]\n",
            spindled_name);
    exit(2);
}

static int declare(spindled_vars_t *v)
{
    const sp_cvar_decl_t decls[] = {
        {"spindle.workers", SP_CVAR_INT, "2", "1", "256", "worker threads", &v->workers},
        {"spindle.pid_file", SP_CVAR_STRING, "", NULL, NULL,
         "pid file locked while running; empty: none", &v->pid_file},
        {"spindle.reuse_port", SP_CVAR_BOOL, "false", NULL, NULL,
         "SO_REUSEPORT: a socket per worker thread, and other processes may bind "
         "the same ports and take a share of the connections", &v->reuse_port},
        {"spindle.daemonize", SP_CVAR_BOOL, "false", NULL, NULL,
         "go to the background (as -d)", &v->daemonize},
        {"spindle.supervise", SP_CVAR_BOOL, "true", NULL, NULL,
         "run the servers in a worker process restarted when it dies", &v->supervise},
        {"spindle.shutdown_timeout", SP_CVAR_DURATION, "10s", "0", "1h",
         "time requests in progress get to finish on SIGTERM", &v->shutdown_timeout},
        {"spindle.dump_on_sigquit", SP_CVAR_BOOL, "true", NULL, NULL,
         "SIGQUIT writes a dump of every fiber to the log (logger "
         "spindle.fibers, WARN)", &v->dump_on_sigquit},
        {"spindle.restart_backoff_min", SP_CVAR_DURATION, "100ms", "1ms", "1h",
         "first delay before restarting a dead worker", &v->backoff_min},
        {"spindle.restart_backoff_max", SP_CVAR_DURATION, "5s", "1ms", "1h",
         "the delay doubles up to this", &v->backoff_max},
        {"spindle.restart_backoff_reset", SP_CVAR_DURATION, "10s", "1ms", "1d",
         "a worker up this long starts the delay from the minimum again",
         &v->backoff_reset},
        {"http.enabled", SP_CVAR_BOOL, "true", NULL, NULL, "run the HTTP server",
         &v->http_enabled},
        {"http.listen", SP_CVAR_LIST, "[127.0.0.1:8080]", NULL, NULL,
         "HTTP addresses: host:port, [v6]:port, unix:/path", &v->http_listen},
        {"http.root", SP_CVAR_STRING, "", NULL, NULL,
         "directory served as static files; empty: none", &v->http_root},
        {"http.keepalive_timeout", SP_CVAR_DURATION, "60s", "0", "1h",
         "idle time between requests before closing (live on SIGHUP)", &v->http_keepalive},
        {"http.header_timeout", SP_CVAR_DURATION, "10s", "1ms", "1h",
         "time to receive a request's headers (live on SIGHUP)", &v->http_header},
        {"http.body_timeout", SP_CVAR_DURATION, "60s", "1ms", "1h",
         "wait for the next bytes of a body", &v->http_body_timeout},
        {"http.send_timeout", SP_CVAR_DURATION, "60s", "1ms", "1h",
         "wait for the client to take response bytes", &v->http_send_timeout},
        {"http.handler_deadline", SP_CVAR_DURATION, "0", "0", "1h",
         "time a request's handler has from the end of the request's headers; "
         "its waits then fail with ETIMEDOUT, an unanswered request gets 504; "
         "0: none", &v->http_handler_deadline},
        {"http.max_body", SP_CVAR_SIZE, "1MiB", "0", "1GiB",
         "largest request body; 0: none allowed", &v->http_max_body},
        {"http.max_conns", SP_CVAR_INT, "0", "-1", "10000000",
         "open connections; 0: from the open-file limit, -1: unlimited",
         &v->http_max_conns},
        {"http.server_name", SP_CVAR_STRING, "spindle", NULL, NULL,
         "Server header; empty: none", &v->http_server_name},
        {"http.access_log", SP_CVAR_BOOL, "false", NULL, NULL,
         "log every request on the logger http.access", &v->http_access_log},
        {"http.status_route", SP_CVAR_BOOL, "false", NULL, NULL,
         "serve /status: the worker's pid and live settings", &v->http_status_route},
        {"http.slow_route", SP_CVAR_BOOL, "false", NULL, NULL,
         "serve /slow?ms=N: holds a request up to 60 s", &v->http_slow_route},
        {"http.ws_echo_route", SP_CVAR_BOOL, "false", NULL, NULL,
         "serve /echo: a WebSocket endpoint sending every message back",
         &v->http_ws_echo_route},
        {"http.ws_deflate", SP_CVAR_BOOL, "false", NULL, NULL,
         "/echo accepts permessage-deflate (compressed messages)", &v->http_ws_deflate},
        {"http.redirect_https", SP_CVAR_BOOL, "false", NULL, NULL,
         "answer every HTTP request with 308 to the same URL on the HTTPS server",
         &v->http_redirect_https},
        {"https.enabled", SP_CVAR_BOOL, "false", NULL, NULL,
         "run the HTTPS server (the HTTP server's routes over TLS)", &v->https_enabled},
        {"https.listen", SP_CVAR_LIST, "[127.0.0.1:8443]", NULL, NULL, "HTTPS addresses",
         &v->https_listen},
        {"https.cert", SP_CVAR_STRING, "", NULL, NULL,
         "certificate file (PEM; the chain after the leaf), read again on SIGHUP",
         &v->https_cert},
        {"https.key", SP_CVAR_STRING, "", NULL, NULL,
         "private key file (PEM), read again on SIGHUP", &v->https_key},
        {"https.protocols", SP_CVAR_STRING, "TLSv1.2", NULL, NULL,
         "oldest protocol accepted: TLSv1.2 or TLSv1.3", &v->https_protocols},
        {"https.ciphers", SP_CVAR_STRING, "", NULL, NULL,
         "TLS 1.2 cipher list (OpenSSL syntax); empty: ECDHE with AES-GCM or "
         "ChaCha20-Poly1305", &v->https_ciphers},
        {"https.ciphersuites", SP_CVAR_STRING, "", NULL, NULL,
         "TLS 1.3 cipher suites; empty: OpenSSL's defaults", &v->https_ciphersuites},
        {"https.handshake_timeout", SP_CVAR_DURATION, "10s", "1ms", "1h",
         "time a new connection has to finish its TLS handshake",
         &v->https_handshake_timeout},
        {"https.ktls", SP_CVAR_BOOL, "false", NULL, NULL,
         "kernel TLS for static files where the kernel has it (logged at start)",
         &v->https_ktls},
        {"echo.enabled", SP_CVAR_BOOL, "true", NULL, NULL, "run the echo server",
         &v->echo_enabled},
        {"echo.listen", SP_CVAR_LIST, "[127.0.0.1:9000]", NULL, NULL, "echo addresses",
         &v->echo_listen},
        {"echo.max_conns", SP_CVAR_INT, "0", "-1", "10000000",
         "open connections; 0: from the open-file limit, -1: unlimited",
         &v->echo_max_conns},
        {"echo.idle_timeout", SP_CVAR_DURATION, "60s", "0", "1d",
         "close a connection when nothing arrives this long; 0: never "
         "(live on SIGHUP)", &v->echo_idle_timeout},
        {"echo.write_timeout", SP_CVAR_DURATION, "30s", "0", "1d",
         "close a connection whose client takes nothing back this long; "
         "0: never (live on SIGHUP)", &v->echo_write_timeout},
        {"admin.listen", SP_CVAR_STRING, "", NULL, NULL,
         "admin listener (/metrics, /status, /debug/fibers): host:port, [v6]:port "
         "or unix:/path; empty: none", &v->admin_listen},
        {"admin.allow_public", SP_CVAR_BOOL, "false", NULL, NULL,
         "let admin.listen be an address other than loopback", &v->admin_allow_public},
    };
    char *errors = NULL;
    int rc = sp_config_declare(NULL, decls, sizeof decls / sizeof decls[0], &errors);
    if (rc < 0)
        fprintf(stderr, "%s: %s", spindled_name, errors ? errors : strerror(-rc));
    free(errors);
    return rc;
}

/* Print a load's problems, one "spindled: file:line:column: ..." each. */
static void print_errors(const char *errors, int rc)
{
    if (!errors) {
        fprintf(stderr, "%s: %s\n", spindled_name, strerror(-rc));
        return;
    }
    for (const char *line = errors; *line;) {
        size_t n = strcspn(line, "\n");
        fprintf(stderr, "%s: %.*s\n", spindled_name, (int)n, line);
        line += n + (line[n] == '\n');
    }
}

/* The file and the environment; the command line was applied first (the
 * registry keeps sources apart, so order does not change precedence). */
static int load_all(spindled_t *d)
{
    char *errors = NULL;
    int rc = 0;
    if (*d->config_path)
        rc = sp_config_load(NULL, d->config_path, &errors);
    if (rc == 0)
        rc = sp_config_load_env(NULL, &errors);
    if (rc < 0)
        print_errors(errors, rc);
    free(errors);
    return rc;
}

int spindled_reload(spindled_t *d)
{
    char *errors = NULL;
    sp_logger_t *log = sp_logger("spindled");
    int rc = *d->config_path ? sp_config_load(NULL, d->config_path, &errors) : 0;
    if (rc == 0)
        rc = sp_config_load_env(NULL, &errors);
    if (rc < 0)
        SP_LOG_ERROR(log, "reload failed, old configuration kept:\n%s",
                     errors ? errors : strerror(-rc));
    else
        SP_LOG_INFO(log, "configuration reloaded");
    free(errors);
    return rc;
}

/* A path variable taken from the start directory into buf[PATH_MAX] (""
 * stays ""). */
static int from_start(const spindled_t *d, const sp_cvar_t *v, char *buf)
{
    const char *path = sp_cvar_string(v);
    const char *full = *path ? spindled_from_start(d, path, buf, PATH_MAX) : "";
    if (full && strlen(full) < PATH_MAX) {
        memmove(buf, full, strlen(full) + 1);
        return 0;
    }
    fprintf(stderr, "%s: %s: path too long\n", spindled_name, sp_cvar_name(v));
    return -ENAMETOOLONG;
}

static int absolute_paths(spindled_t *d, const char *config)
{
    if (config && !realpath(config, d->config_path)) {
        fprintf(stderr, "%s: %s: %s\n", spindled_name, config, strerror(errno));
        return -errno;
    }
    if (!config && (from_start(d, d->v.https_cert, d->tls_cert) < 0 ||
                    from_start(d, d->v.https_key, d->tls_key) < 0))
        return -ENAMETOOLONG;
    const char *root = sp_cvar_string(d->v.http_root);
    if (*root && !realpath(root, d->root)) {
        fprintf(stderr, "%s: http.root %s: %s\n", spindled_name, root, strerror(errno));
        return -errno;
    }
    return 0;
}

typedef struct cli {
    const char *config;
    bool detach, print_config;
} cli_t;

static cli_t parse_args(int argc, char **argv)
{
    cli_t c = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc)
            c.config = argv[++i];
        else if (!strcmp(argv[i], "-d"))
            c.detach = true;
        else if (!strcmp(argv[i], "--print-config"))
            c.print_config = true;
        else
            usage();
    }
    return c;
}

static int run(spindled_t *d, bool detach)
{
    const spindled_vars_t *v = &d->v;
    sp_daemon_opts_t o = {
        .name = spindled_name,
        .detach = detach || sp_cvar_bool(v->daemonize),
        .pid_file = sp_cvar_string(v->pid_file),
        .no_supervisor = !sp_cvar_bool(v->supervise),
        .backoff_min_us = sp_cvar_duration(v->backoff_min),
        .backoff_max_us = sp_cvar_duration(v->backoff_max),
        .stable_us = sp_cvar_duration(v->backoff_reset),
        .notify_ready = true,
    };
    return sp_daemon_run(&o, spindled_worker, d);
}

int main(int argc, char **argv)
{
    static spindled_t d;
    if (declare(&d.v) < 0 || sp_log_use_config(NULL) < 0)
        return 1;
    int rc = spindled_add_checks(&d);
    if (rc < 0) {
        print_errors(NULL, rc);
        return 1;
    }
    char *errors = NULL;
    /* -s settings first: they are taken out of argv, the rest is ours. */
    rc = sp_config_args(NULL, &argc, argv, &errors);
    if (rc < 0) {
        print_errors(errors, rc);
        free(errors);
        return 2;
    }
    cli_t c = parse_args(argc, argv);
    if (c.config && absolute_paths(&d, c.config) < 0)
        return 2;
    if (load_all(&d) < 0 || spindled_check_servers(&d) < 0 || spindled_check_admin(&d) < 0)
        return 2;
    if (c.print_config)
        return sp_config_print(NULL, stdout) == 0 ? 0 : 1;
    if (absolute_paths(&d, NULL) < 0 || spindled_check_https(&d) < 0)
        return 2;
    return run(&d, c.detach);
}
