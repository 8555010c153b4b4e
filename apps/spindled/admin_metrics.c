/* spindled's metrics: a collector (spindle/metrics.h) that reads, each
 * time /metrics is asked for, the stats the framework keeps anyway: per
 * worker of the IOManager, per server, the log's losses and the
 * supervisor's restarts. Nothing here runs on the request path. */
#include <stdio.h>

#include <spindle/daemon.h>
#include <spindle/debug.h>
#include <spindle/log.h>
#include <spindle/metrics.h>
#include <spindle/scheduler.h>

#include "spindled.h"

#define C SP_METRIC_COUNTER
#define G SP_METRIC_GAUGE

/* One sample of a table, all with the same labels. */
typedef struct sample {
    const char *name, *help;
    sp_metric_type_t type;
    double value;
} sample_t;

static void emit_all(sp_metrics_out_t *o, const char *const *labels, const sample_t *s,
                     size_t n)
{
    for (size_t i = 0; i < n; i++)
        sp_metrics_emit(o, s[i].name, s[i].help, s[i].type, labels, s[i].value);
}

#define EMIT_ALL(o, labels, ...)                                                     \
    emit_all(o, labels, (const sample_t[]){__VA_ARGS__},                             \
             sizeof((const sample_t[]){__VA_ARGS__}) / sizeof(sample_t))

static void workers(sp_metrics_out_t *o, sp_iomanager_t *io)
{
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    sp_monitor_stats_t m = {0};
    sp_scheduler_monitor_stats(s, &m);
    int n = m.threads > 0 ? m.threads : sp_scheduler_threads(s);
    for (int w = 0; w < n; w++) {
        sp_worker_stats_t st;
        sp_io_stats_t x;
        if (sp_scheduler_stats(s, w, &st) < 0 || sp_iomanager_stats(io, w, &x) < 0)
            continue;
        char id[16];
        snprintf(id, sizeof id, "%d", w);
        const char *l[] = {"worker", id, NULL};
        EMIT_ALL(o, l,
                 {"spindle_worker_tasks_run_total", "Tasks that finished.", C, (double)st.tasks_run},
                 {"spindle_worker_switches_total", "Switches into task fibers.", C,
                  (double)st.switches},
                 {"spindle_worker_steals_total", "Tasks taken from other workers' queues.", C,
                  (double)st.steals},
                 {"spindle_worker_polls_total",
                  "Event loop iterations: waits for work and busy ticks.", C, (double)st.polls},
                 {"spindle_worker_idle_seconds_total", "Time blocked waiting for work.", C,
                  (double)st.idle_us / 1e6},
                 {"spindle_worker_run_queue", "Tasks queued now.", G, (double)st.queued},
                 {"spindle_worker_fibers", "Started task fibers living here: running, queued or "
                  "parked.", G, (double)st.fibers},
                 {"spindle_io_fd_waits", "Fibers waiting on an fd now.", G, (double)x.fd_waits},
                 {"spindle_io_timers", "Timers armed now.", G, (double)x.timers});
    }
}

/* Responses by status class, refusals by limit, latency. */
static void http_kinds(sp_metrics_out_t *o, const char *name, const sp_http_server_stats_t *st)
{
    static const char *const classes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    static const char *const limits[SP_HTTP_LIMITS] = {"timeout", "body", "uri", "headers",
                                                       "busy"};
    static const double bounds_us[] = SP_HTTP_LATENCY_BOUNDS_US;
    for (int i = 0; i < 5; i++) {
        const char *l[] = {"server", name, "code", classes[i], NULL};
        sp_metrics_emit(o, "spindle_http_responses_total", "Responses by status class.", C, l,
                        (double)st->status[i]);
    }
    for (int i = 0; i < SP_HTTP_LIMITS; i++) {
        const char *l[] = {"server", name, "limit", limits[i], NULL};
        sp_metrics_emit(o, "spindle_http_rejected_total", "Requests refused by a limit.", C, l,
                        (double)st->limits[i]);
    }
    double bounds[SP_HTTP_LATENCY_BUCKETS];
    for (int i = 0; i < SP_HTTP_LATENCY_BUCKETS; i++)
        bounds[i] = bounds_us[i] / 1e6;
    const char *l[] = {"server", name, NULL};
    sp_metrics_emit_histogram(o, "spindle_http_request_duration_seconds",
                              "From a request's first byte to its response.", l, bounds,
                              SP_HTTP_LATENCY_BUCKETS, st->latency,
                              (double)st->latency_sum_us / 1e6);
}

static void http(sp_metrics_out_t *o, const char *name, const sp_http_server_t *srv)
{
    sp_http_server_stats_t st;
    if (!srv || sp_http_server_stats(srv, &st) < 0)
        return;
    http_kinds(o, name, &st);
    const char *l[] = {"server", name, NULL};
    EMIT_ALL(o, l,
             {"spindle_http_connections_total", "Connections accepted.", C,
              (double)st.connections},
             {"spindle_http_handler_errors_total", "Handlers that failed.", C,
              (double)st.handler_errors},
             {"spindle_http_received_bytes_total", "Bytes read from clients.", C,
              (double)st.bytes_in},
             {"spindle_http_sent_bytes_total", "Bytes sent to clients.", C, (double)st.bytes_out},
             {"spindle_http_connections_active", "Connections open now.", G, (double)st.active},
             {"spindle_http_connections_idle",
              "Keep-alive connections waiting for a next request.", G, (double)st.idle});
}

/* Connections per listening address of a server. */
static void listeners(sp_metrics_out_t *o, const char *name, const void *srv,
                      const app_server_ops_t *ops)
{
    for (int i = 0; srv && i < ops->naddrs(srv); i++) {
        sp_tcp_server_stats_t st;
        sp_addr_t a;
        char text[SP_ADDR_TEXT_MAX];
        if (ops->addr_stats(srv, i, &st) < 0 || ops->addr(srv, i, &a) < 0)
            continue;
        sp_addr_format(&a, text, sizeof text);
        const char *l[] = {"server", name, "listener", text, NULL};
        EMIT_ALL(o, l,
                 {"spindle_tcp_accepted_total", "Connections handed to the handler.", C,
                  (double)st.accepted},
                 {"spindle_tcp_refused_total",
                  "Connections closed at once: over the limit or out of fds.", C,
                  (double)st.refused},
                 {"spindle_tcp_active", "Connections open now.", G, (double)st.active});
    }
}

static void process(sp_metrics_out_t *o)
{
    sp_log_stats_t log;
    sp_log_stats(&log);
    EMIT_ALL(o, NULL,
             {"spindle_log_dropped_total", "Log messages dropped: the queue was full.", C,
              (double)log.dropped},
             {"spindle_log_lost_total", "Log lines a failed write kept out.", C, (double)log.lost},
             {"spindle_log_write_errors_total", "Log writes that failed.", C,
              (double)log.write_errors},
             {"spindle_daemon_restarts_total", "Workers the supervisor restarted before this one.",
              C, (double)sp_daemon_restarts()});
}

/* Every live fiber by state, and their stacks' committed memory. */
static void fibers(sp_metrics_out_t *o)
{
    sp_fibers_count_t n;
    if (sp_fibers_count(&n) < 0)
        return;
    static const char *const states[] = {"running", "runnable", "parked", "suspended"};
    const size_t counts[] = {n.running, n.runnable, n.parked, n.suspended};
    for (int i = 0; i < 4; i++) {
        const char *l[] = {"state", states[i], NULL};
        sp_metrics_emit(o, "spindle_fibers", "Live fibers by state.", G, l, (double)counts[i]);
    }
    EMIT_ALL(o, NULL,
             {"spindle_fiber_stack_bytes", "Stack memory the live fibers have committed.", G,
              (double)n.stack_bytes});
}

/* The helper pool that blocking calls (lookups, offloaded file I/O,
 * sp_run_blocking) run on. */
static void helpers(sp_metrics_out_t *o)
{
    sp_blocking_stats_t b;
    sp_blocking_stats(&b);
    EMIT_ALL(o, NULL,
             {"spindle_blocking_jobs_total", "Blocking calls run on helper threads.", C,
              (double)b.jobs},
             {"spindle_blocking_abandoned_total", "Of those, ones whose fiber was interrupted.",
              C, (double)b.abandoned},
             {"spindle_blocking_queued", "Blocking calls waiting for a helper thread.", G,
              (double)b.queued},
             {"spindle_blocking_threads", "Helper threads.", G, (double)b.threads});
}

void spindled_collect(sp_metrics_out_t *o, void *arg)
{
    const spindled_servers_t *s = arg;
    workers(o, s->io);
    fibers(o);
    helpers(o);
    http(o, "http", s->http);
    http(o, "https", s->https);
    http(o, "admin", s->admin);
    listeners(o, "http", s->http, &app_http_ops);
    listeners(o, "https", s->https, &app_http_ops);
    listeners(o, "admin", s->admin, &app_http_ops);
    listeners(o, "echo", s->echo, &app_tcp_ops);
    process(o);
}
