/* Metrics: counters, gauges and histograms in one process-wide registry,
 * written out in the Prometheus text exposition format 0.0.4
 * (sp_metrics_write; spindled serves it as /metrics on its admin
 * listener, docs/observability.md).
 *
 * A counter or histogram keeps one slot per thread that updates it, each
 * written only by its thread (a relaxed load and store, no locked
 * instruction, no shared cache line) and summed when the page is written;
 * threads past the first SP_METRICS_SLOTS - 1 share the last slot, with
 * atomic adds. Values
 * that something else already counts (a server's stats) are better read
 * at write time by a collector (sp_metrics_add_collector) than counted
 * twice.
 *
 * Names follow Prometheus: [a-zA-Z_:][a-zA-Z0-9_:]*; label names
 * [a-zA-Z_][a-zA-Z0-9_]* not starting with "__". Labels are fixed when a
 * metric is made: a NULL-terminated array of name, value, name, value...
 * (NULL or {NULL}: none). Metrics registered under one name with different
 * labels are one family on the page (one HELP and TYPE line: the first
 * registered). */
#ifndef SPINDLE_METRICS_H
#define SPINDLE_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Slots of every counter and histogram: one per thread, the last shared. */
#define SP_METRICS_SLOTS 64
/* Most bucket bounds of one histogram (+Inf comes on top). */
#define SP_METRICS_MAX_BUCKETS 32

typedef enum sp_metric_type {
    SP_METRIC_COUNTER,
    SP_METRIC_GAUGE,
    SP_METRIC_HISTOGRAM,
} sp_metric_type_t;

typedef struct sp_metric sp_metric_t;

/* Register a metric; NULL + errno: EINVAL (a bad name, label or bounds:
 * bounds must be finite and increasing, 1..SP_METRICS_MAX_BUCKETS of
 * them), EEXIST (that name and labels are registered, or the name has
 * another type), ENOMEM. `help` may be NULL. The strings are copied. */
sp_metric_t *sp_metrics_counter(const char *name, const char *help,
                                const char *const *labels);
sp_metric_t *sp_metrics_gauge(const char *name, const char *help,
                              const char *const *labels);
sp_metric_t *sp_metrics_histogram(const char *name, const char *help,
                                  const char *const *labels,
                                  const double *bounds, size_t nbounds);
/* Take a metric off the page and free it; no update may be under way or
 * come later. NULL is a no-op. */
void sp_metrics_remove(sp_metric_t *m);

/* Updates, from any thread: a counter grows by n; a gauge is set or moved
 * by delta (atomic, for values any thread changes); a histogram counts v
 * in the first bucket whose bound is >= v (and adds v to its sum). A call
 * of the wrong type is a no-op. */
void sp_metrics_add(sp_metric_t *counter, uint64_t n);
void sp_metrics_set(sp_metric_t *gauge, double v);
void sp_metrics_gauge_add(sp_metric_t *gauge, double delta);
void sp_metrics_observe(sp_metric_t *histogram, double v);

/* The value of a counter or gauge now (a counter's slots summed); a
 * histogram: its count. 0 for NULL. */
double sp_metrics_value(const sp_metric_t *m);

/* ---- collectors ---------------------------------------------------------- */

/* A collector writes samples of values it reads when the page is written
 * (from sp_metrics_write's thread, under the registry's lock: it must not
 * register or remove metrics). Samples join the families of the same name
 * from other collectors and registered metrics. */
typedef struct sp_metrics_out sp_metrics_out_t;
typedef void (*sp_metrics_collect_fn)(sp_metrics_out_t *out, void *arg);

/* 0, -EEXIST (that fn and arg are registered), -ENOMEM. */
int sp_metrics_add_collector(sp_metrics_collect_fn fn, void *arg);
/* Returns once no write is calling fn(arg). 0 or -ENOENT. */
int sp_metrics_remove_collector(sp_metrics_collect_fn fn, void *arg);

/* One counter or gauge sample; a bad name or label is skipped. */
void sp_metrics_emit(sp_metrics_out_t *out, const char *name, const char *help,
                     sp_metric_type_t type, const char *const *labels, double value);
/* One histogram: counts[i] observations in bucket i (not cumulative; i ==
 * nbounds: above the last bound), their sum. */
void sp_metrics_emit_histogram(sp_metrics_out_t *out, const char *name,
                               const char *help, const char *const *labels,
                               const double *bounds, size_t nbounds,
                               const uint64_t *counts, double sum);

/* ---- the page ------------------------------------------------------------ */

/* The content type of what sp_metrics_write writes. */
#define SP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Write every metric and collector's samples to `out`, grouped by family
 * in the order the families first appeared. 0 or -errno (-EIO: a write
 * failed, -ENOMEM). */
int sp_metrics_write(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
