/* See apps_common.h. */
#include <limits.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps_common.h"
#include <spindle/debug.h>
#include <spindle/tcp_server.h>
#include <errno.h>

/* A fixed answer: its body's length counted once, and its Content-Type
 * line made once (prepare_fixed; NULL if that ran out of memory). */
typedef struct fixed {
    const char *type, *body;
    size_t len;
    sp_http_header_t *type_line;
} fixed_t;

#define FIXED(type, body) {type, body, sizeof body - 1, NULL}
static fixed_t plaintext = FIXED("text/plain", "Hello, World!");
static fixed_t json = FIXED("application/json", "{\"message\":\"Hello, World!\"}");
static pthread_once_t fixed_once = PTHREAD_ONCE_INIT;

/* For the life of the process, like the answers themselves. */
static void prepare_fixed(void)
{
    plaintext.type_line = sp_http_header_new("Content-Type", plaintext.type);
    json.type_line = sp_http_header_new("Content-Type", json.type);
}

static int answer_n(sp_http_response_t *res, const char *type, const char *body, size_t len)
{
    int rc = sp_http_response_add_header(res, "Content-Type", type);
    return rc < 0 ? rc : sp_http_response_set_body(res, body, len);
}

int app_answer(sp_http_response_t *res, const char *type, const char *body)
{
    return answer_n(res, type, body, strlen(body));
}

static int fixed_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    const fixed_t *f = arg;
    if (!f->type_line)
        return answer_n(res, f->type, f->body, f->len);
    int rc = sp_http_response_add_prepared(res, f->type_line);
    return rc < 0 ? rc : sp_http_response_set_body(res, f->body, f->len);
}

void app_add_hello_routes(sp_http_router_t *r)
{
    pthread_once(&fixed_once, prepare_fixed);
    sp_http_router_add(r, SP_HTTP_EXACT, "/plaintext", SP_HTTP_M_GET, fixed_answer, &plaintext);
    sp_http_router_add(r, SP_HTTP_EXACT, "/json", SP_HTTP_M_GET, fixed_answer, &json);
}

bool app_parse_int(const char *text, int min, int max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max)
        return false;
    *out = (int)v;
    return true;
}

bool app_parse_max_conns(const char *text, int *out)
{
    if (!app_parse_int(text, 0, INT_MAX, out))
        return false;
    if (*out == 0)
        *out = -1;
    return true;
}

void app_print_listening(const sp_addr_t *a, const char *what)
{
    char text[SP_ADDR_TEXT_MAX];
    sp_addr_format(a, text, sizeof text);
    if (what)
        printf("listening on %s (%s)\n", text, what);
    else
        printf("listening on %s\n", text);
}

static int tcp_listen(void *srv, const sp_addr_t *a)
{
    return sp_tcp_server_listen(srv, a);
}

static int tcp_naddrs(const void *srv)
{
    return sp_tcp_server_naddrs(srv);
}

static int tcp_addr(const void *srv, int i, sp_addr_t *out)
{
    return sp_tcp_server_addr(srv, i, out);
}

static int http_listen(void *srv, const sp_addr_t *a)
{
    return sp_http_server_listen(srv, a);
}

static int http_naddrs(const void *srv)
{
    return sp_http_server_naddrs(srv);
}

static int http_addr(const void *srv, int i, sp_addr_t *out)
{
    return sp_http_server_addr(srv, i, out);
}

static int tcp_start(void *srv)
{
    return sp_tcp_server_start(srv);
}

static void tcp_stop(void *srv, int64_t drain_us)
{
    sp_tcp_server_stop(srv, drain_us);
}

static int http_start(void *srv)
{
    return sp_http_server_start(srv);
}

static void http_stop(void *srv, int64_t drain_us)
{
    sp_http_server_stop(srv, drain_us);
}

static int tcp_addr_stats(const void *srv, int i, sp_tcp_server_stats_t *out)
{
    return sp_tcp_server_addr_stats(srv, i, out);
}

static int http_addr_stats(const void *srv, int i, sp_tcp_server_stats_t *out)
{
    return sp_http_server_addr_stats(srv, i, out);
}

const app_server_ops_t app_tcp_ops = {tcp_listen, tcp_naddrs, tcp_addr, tcp_start,
                                      tcp_stop, tcp_addr_stats};
const app_server_ops_t app_http_ops = {http_listen, http_naddrs, http_addr,
                                       http_start, http_stop, http_addr_stats};

int app_listen_all(const app_server_ops_t *ops, void *srv, const char *const *texts,
                   size_t n, const char *prefix)
{
    for (size_t i = 0; i < n; i++) {
        sp_addr_t a;
        int rc = sp_addr_resolve(texts[i], &a, 1) < 1 ? -EINVAL : ops->listen(srv, &a);
        if (rc < 0) {
            fprintf(stderr, "%s %s: %s\n", prefix, texts[i], strerror(-rc));
            return rc;
        }
    }
    return 0;
}

void app_print_all(const app_server_ops_t *ops, const void *srv, const char *what)
{
    for (int i = 0; srv && i < ops->naddrs(srv); i++) {
        sp_addr_t a;
        ops->addr(srv, i, &a);
        app_print_listening(&a, what);
    }
}

void app_block_stop_signals(sigset_t *stop_signals)
{
    sigemptyset(stop_signals);
    sigaddset(stop_signals, SIGINT);
    sigaddset(stop_signals, SIGTERM);
    sigaddset(stop_signals, SIGQUIT); /* not a stop: a fiber dump */
    pthread_sigmask(SIG_BLOCK, stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* What the stop fiber needs. */
typedef struct stop_watch {
    const app_server_ops_t *ops;
    void *srv;
    int fd; /* signalfd of the stop signals */
    int64_t drain_us;
    int sig;
} stop_watch_t;

/* A fiber: wait for a stop signal on the signalfd (the signals are blocked
 * in every thread, so they stay pending for it), then drain and stop the
 * server; the last task to end, it lets sp_iomanager_stop() return.
 * SIGQUIT on the way writes a fiber dump to stderr (from this fiber: no
 * thread of its own, so --workers 1 stays one thread). */
static void stop_on_signal(void *arg)
{
    stop_watch_t *sw = arg;
    struct signalfd_siginfo si;
    int rc;
    while ((rc = sp_io_wait(sw->fd, SP_IO_READ, -1)) == 0) {
        if (read(sw->fd, &si, sizeof si) != (ssize_t)sizeof si)
            continue;
        if (si.ssi_signo != SIGQUIT)
            break;
        sp_fibers_dump(stderr, 0);
    }
    sw->sig = rc == 0 ? (int)si.ssi_signo : SIGTERM;
    sw->ops->stop(sw->srv, sw->drain_us);
}

int app_serve(const app_server_ops_t *ops, void *srv, sp_iomanager_t *io,
              const char *const *texts, size_t n, const char *prefix,
              sigset_t *stop_signals, int64_t drain_us, int *sig)
{
    stop_watch_t sw = {ops, srv, -1, drain_us, 0};
    sw.fd = signalfd(-1, stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sw.fd < 0) {
        fprintf(stderr, "%s signalfd: %s\n", prefix, strerror(errno));
        return 1;
    }
    if (app_listen_all(ops, srv, texts, n, prefix) < 0) {
        close(sw.fd);
        return 2;
    }
    int rc = sp_iomanager_start(io);
    if (rc == 0)
        rc = ops->start(srv);
    if (rc == 0)
        rc = sp_schedule(sp_iomanager_scheduler(io), stop_on_signal, &sw,
                         SP_ANY_WORKER);
    if (rc < 0) {
        fprintf(stderr, "%s %s\n", prefix, strerror(-rc));
        close(sw.fd);
        return 1;
    }
    app_print_all(ops, srv, NULL);
    fflush(stdout); /* tests read the lines through a pipe */
    sp_iomanager_stop(io); /* this thread is worker 0 until all is done */
    close(sw.fd);
    *sig = sw.sig;
    return 0;
}
