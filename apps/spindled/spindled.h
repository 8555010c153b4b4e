/* spindled: the configuration variables (main.c), the checks of their
 * values (checks.c) and the worker that runs the servers they describe
 * (worker.c). */
#ifndef SPINDLED_H
#define SPINDLED_H

#include <limits.h>

#include <spindle/config.h>

/* Every variable the daemon reads, declared in main.c. */
typedef struct spindled_vars {
    sp_cvar_t *workers, *pid_file, *reuse_port, *daemonize, *supervise, *shutdown_timeout,
        *dump_on_sigquit;
    sp_cvar_t *backoff_min, *backoff_max, *backoff_reset;
    sp_cvar_t *http_enabled, *http_listen, *http_root, *http_keepalive, *http_header,
        *http_body_timeout, *http_send_timeout, *http_handler_deadline, *http_max_body,
        *http_max_conns,
        *http_server_name, *http_access_log, *http_status_route, *http_slow_route;
    sp_cvar_t *echo_enabled, *echo_listen, *echo_max_conns, *echo_idle_timeout,
        *echo_write_timeout;
} spindled_vars_t;

typedef struct spindled {
    spindled_vars_t v;
    char config_path[PATH_MAX]; /* absolute (a daemon runs in /); "" = none */
    char root[PATH_MAX];        /* http.root made absolute at start */
    char start_dir[PATH_MAX];   /* where relative paths are taken from */
} spindled_t;

extern const char *const spindled_name;

/* Refuse, whenever they are loaded, the values the worker could not use
 * (addresses, paths, the Server header). Call once, after the variables
 * are declared and before the first load; it records the start
 * directory. 0 or a negative errno. */
int spindled_add_checks(spindled_t *d);

/* The rule no single value can check: the HTTP and echo servers (both
 * enabled) listen on no common address. Prints the clash with both
 * sources; 0 or -EINVAL. Checked at start: addresses are only read then. */
int spindled_check_servers(const spindled_t *d);

/* Load the configuration file again and the environment; log problems and
 * keep the old values when it is bad. 0 or a negative errno. */
int spindled_reload(spindled_t *d);

/* The worker process's body (sp_daemon_fn): start the servers, serve until
 * SIGTERM/SIGINT, reload on SIGHUP. Returns the exit status. */
int spindled_worker(void *arg);

#endif
