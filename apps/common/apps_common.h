/* Small pieces the example servers share (spindle-httpd, spindle-echo,
 * spindled), so that they answer and report alike. */
#ifndef SPINDLE_APPS_COMMON_H
#define SPINDLE_APPS_COMMON_H

#include <signal.h>
#include <stdbool.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>

/* GET /plaintext ("Hello, World!", text/plain) and GET /json
 * ({"message":"Hello, World!"}), the TechEmpower-style answers. */
void app_add_hello_routes(sp_http_router_t *r);

/* A WebSocket endpoint at path sending every message back (default
 * limits: 1 MiB messages, 60 s idle), accepting permessage-deflate if
 * `deflate`. As sp_http_router_add_ws. */
int app_add_ws_echo(sp_http_router_t *r, const char *path, bool deflate);

/* Answer with a body and its Content-Type. */
int app_answer(sp_http_response_t *res, const char *type, const char *body);

/* The echo service: a handler that writes back what it reads until EOF,
 * and its timeouts (milliseconds, 0: none). A connection on which nothing
 * arrives for idle_ms is closed, and so is one whose client takes none of
 * what is written back for write_ms (a stalled write). */
typedef struct app_echo app_echo_t;
/* For the connections of servers on io. NULL + errno. */
app_echo_t *app_echo_create(sp_iomanager_t *io, int64_t idle_ms, int64_t write_ms);
/* New timeouts, from any thread (a reload). Open connections follow them,
 * except those that started while there were none. */
void app_echo_set_timeouts(app_echo_t *e, int64_t idle_ms, int64_t write_ms);
/* Free it once its servers are stopped and io has stopped. NULL: no-op. */
void app_echo_destroy(app_echo_t *e);
/* The TCP server handler; arg is an app_echo_t, or NULL for no timeouts. */
void app_echo(int fd, const sp_addr_t *peer, void *arg);

/* A whole decimal number in [min, max] from a command-line argument;
 * false for anything else ("-1" where min is 0, "12x", "", overflow). */
bool app_parse_int(const char *text, int min, int max, int *out);
/* --max-conns N: N >= 0, where 0 means no limit (-1 in the servers'
 * options, whose 0 is the default derived from the open-file limit). */
bool app_parse_max_conns(const char *text, int *out);

/* Print "listening on ADDR" (port 0 shows the kernel's port), with
 * " (what)" appended when what is not NULL. Call fflush(stdout) after the
 * last one: tests read these lines through a pipe. */
void app_print_listening(const sp_addr_t *a, const char *what);

/* A TCP or HTTP server seen alike, so the programs set up, report and stop
 * either kind the same way. */
typedef struct app_server_ops {
    int (*listen)(void *srv, const sp_addr_t *addr);
    int (*naddrs)(const void *srv);
    int (*addr)(const void *srv, int i, sp_addr_t *out);
    int (*start)(void *srv);
    void (*stop)(void *srv, int64_t drain_us);
    /* The connection counts of address i. */
    int (*addr_stats)(const void *srv, int i, sp_tcp_server_stats_t *out);
} app_server_ops_t;

extern const app_server_ops_t app_tcp_ops;  /* sp_tcp_server_t */
extern const app_server_ops_t app_http_ops; /* sp_http_server_t */

/* Resolve each address text and listen on it. On the first failure prints
 * "PREFIX TEXT: error" on stderr and returns the negative errno. */
int app_listen_all(const app_server_ops_t *ops, void *srv, const char *const *texts,
                   size_t n, const char *prefix);
/* app_print_listening for every address of srv (none for NULL). */
void app_print_all(const app_server_ops_t *ops, const void *srv, const char *what);

/* Block SIGINT and SIGTERM in the calling thread, before any worker starts
 * (workers inherit the mask, so the signals stay pending for app_serve's
 * signalfd), and ignore SIGPIPE. */
void app_block_stop_signals(sigset_t *stop_signals);
/* The life of a one-server program: listen on the address texts, start io
 * and srv, print where it listens, then serve on the calling thread too
 * (io must be created with use_caller: with one worker the process has one
 * thread, and the kernel skips the file reference counting it does on
 * every read and write of a multi-threaded process) until a stop signal;
 * then stop srv (drain_us for connections to finish) and io. Returns 0 with
 * the signal in *sig, or after printing the error "PREFIX ..." the exit
 * status: 2 when an address failed, 1 when starting did. */
int app_serve(const app_server_ops_t *ops, void *srv, sp_iomanager_t *io,
              const char *const *texts, size_t n, const char *prefix,
              sigset_t *stop_signals, int64_t drain_us, int *sig);

#endif
