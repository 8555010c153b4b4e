/* Metrics (spindle/metrics.h): counters summed over threads, gauges,
 * histograms and collectors on one page that a strict Prometheus
 * text-format reader (tests/tools/prom_parse.py) accepts with the values
 * expected; escaping; refused names, labels and bounds. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/metrics.h>

#include "testutil.h"

/* The page now, checked by prom_parse.py with `expects` (NAME=VALUE...,
 * shell-quoted by the caller); the reader's exit status. */
static int check_page(const char *expects)
{
    char path[] = "/tmp/sp-metrics-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_int_eq(sp_metrics_write(f), 0);
    fclose(f);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 %s %s %s", PROM_PARSE, path, expects);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s", path);
        ck_assert_int_eq(system(cmd), 0);
    }
    unlink(path);
    return rc;
}

enum { THREADS = 8, ADDS = 100000 };

static void *add_many(void *arg)
{
    for (int i = 0; i < ADDS; i++)
        sp_metrics_add(arg, 1);
    return NULL;
}

START_TEST(counter_sums_threads)
{
    sp_metric_t *c = sp_metrics_counter("t_adds_total", "adds from threads", NULL);
    ck_assert_ptr_nonnull(c);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, add_many, c), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert(sp_metrics_value(c) == (double)THREADS * ADDS);
    ck_assert_int_eq(check_page("'t_adds_total=800000'"), 0);
    sp_metrics_remove(c);
}
END_TEST

/* More threads than slots: the ones past them share the last slot. */
START_TEST(counter_past_the_slots)
{
    sp_metric_t *c = sp_metrics_counter("t_many_total", "", NULL);
    for (int round = 0; round < SP_METRICS_SLOTS / THREADS + 2; round++) {
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, add_many, c), 0);
        for (int i = 0; i < THREADS; i++)
            pthread_join(t[i], NULL);
    }
    ck_assert(sp_metrics_value(c) == (double)(SP_METRICS_SLOTS / THREADS + 2) * THREADS * ADDS);
    sp_metrics_remove(c);
}
END_TEST

START_TEST(families_labels_and_escapes)
{
    const char *a[] = {"path", "a\"b\\c\nd", NULL};
    const char *b[] = {"path", "/x", NULL};
    sp_metric_t *c1 = sp_metrics_counter("t_req_total", "requests\\by \"path\"\nsecond", a);
    sp_metric_t *g = sp_metrics_gauge("t_temp", NULL, NULL);
    sp_metric_t *c2 = sp_metrics_counter("t_req_total", "ignored", b);
    ck_assert_ptr_nonnull(c1);
    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_nonnull(c2);
    sp_metrics_add(c1, 3);
    sp_metrics_add(c2, 5);
    sp_metrics_set(g, -2.5);
    sp_metrics_gauge_add(g, 1);
    ck_assert_int_eq(check_page("'t_req_total{path=\"a\\\"b\\\\c\\nd\"}=3' "
                                "'t_req_total{path=\"/x\"}=5' 't_temp=-1.5'"),
                     0);
    /* Taken: the same name and labels, or the name with another type. */
    ck_assert_ptr_null(sp_metrics_counter("t_req_total", "", b));
    ck_assert_int_eq(errno, EEXIST);
    ck_assert_ptr_null(sp_metrics_gauge("t_req_total", "", NULL));
    ck_assert_int_eq(errno, EEXIST);
    sp_metrics_remove(c1);
    sp_metrics_remove(c2);
    sp_metrics_remove(g);
}
END_TEST

START_TEST(histogram_buckets)
{
    const double bounds[] = {0.001, 0.01, 0.1, 1};
    const char *l[] = {"route", "/", NULL};
    sp_metric_t *h = sp_metrics_histogram("t_seconds", "latency", l, bounds, 4);
    ck_assert_ptr_nonnull(h);
    const double seen[] = {0.0005, 0.001, 0.05, 0.05, 2, 7};
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++)
        sp_metrics_observe(h, seen[i]);
    ck_assert_int_eq(check_page("'t_seconds_bucket{route=\"/\",le=\"0.001\"}=2' "
                                "'t_seconds_bucket{route=\"/\",le=\"0.01\"}=2' "
                                "'t_seconds_bucket{route=\"/\",le=\"0.1\"}=4' "
                                "'t_seconds_bucket{route=\"/\",le=\"1\"}=4' "
                                "'t_seconds_bucket{route=\"/\",le=\"+Inf\"}=6' "
                                "'t_seconds_count{route=\"/\"}=6' "
                                "'t_seconds_sum{route=\"/\"}=9.1015'"),
                     0);
    sp_metrics_remove(h);
}
END_TEST

static void collect(sp_metrics_out_t *out, void *arg)
{
    const int *n = arg;
    for (int w = 0; w < 2; w++) {
        char id[8];
        snprintf(id, sizeof id, "%d", w);
        const char *l[] = {"worker", id, NULL};
        sp_metrics_emit(out, "t_worker_runs_total", "runs", SP_METRIC_COUNTER, l, *n + w);
        sp_metrics_emit(out, "t_worker_queue", "queued", SP_METRIC_GAUGE, l, NAN);
    }
    const double bounds[] = {1, 2};
    const uint64_t counts[] = {1, 0, 2};
    sp_metrics_emit_histogram(out, "t_sizes", "sizes", NULL, bounds, 2, counts, 9);
    sp_metrics_emit(out, "bad name", "", SP_METRIC_GAUGE, NULL, 1);
}

/* Two collectors writing into the same families: each family stays one
 * block, with one HELP and TYPE. */
START_TEST(collectors_share_families)
{
    sp_metric_t *c = sp_metrics_counter("t_worker_runs_total", "runs", NULL);
    int one = 10, two = 20;
    ck_assert_int_eq(sp_metrics_add_collector(collect, &one), 0);
    ck_assert_int_eq(sp_metrics_add_collector(collect, &one), -EEXIST);
    ck_assert_int_eq(sp_metrics_add_collector(collect, &two), 0);
    /* Two collectors give the same series twice: the reader refuses it. */
    ck_assert_int_ne(check_page(""), 0);
    ck_assert_int_eq(sp_metrics_remove_collector(collect, &two), 0);
    ck_assert_int_eq(sp_metrics_remove_collector(collect, &two), -ENOENT);
    ck_assert_int_eq(check_page("'t_worker_runs_total{worker=\"1\"}=11' "
                                "'t_sizes_bucket{le=\"2\"}=1' 't_sizes_count=3'"),
                     0);
    ck_assert_int_eq(sp_metrics_remove_collector(collect, &one), 0);
    sp_metrics_remove(c);
}
END_TEST

START_TEST(refused)
{
    const double up[] = {1, 2}, down[] = {2, 1}, inf[] = {1, INFINITY};
    const char *bad_label[] = {"__x", "v", NULL}, *le[] = {"le", "1", NULL},
               *odd[] = {"a", NULL};
    ck_assert_ptr_null(sp_metrics_counter("9lives", "", NULL));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_null(sp_metrics_counter("a-b", "", NULL));
    ck_assert_ptr_null(sp_metrics_counter("ok", "", bad_label));
    ck_assert_ptr_null(sp_metrics_counter("ok", "", odd));
    ck_assert_ptr_null(sp_metrics_histogram("h", "", le, up, 2));
    ck_assert_ptr_null(sp_metrics_histogram("h", "", NULL, down, 2));
    ck_assert_ptr_null(sp_metrics_histogram("h", "", NULL, inf, 2));
    ck_assert_ptr_null(sp_metrics_histogram("h", "", NULL, up, 0));
    ck_assert_int_eq(errno, EINVAL);
    /* An empty registry is an empty page, which is valid. */
    ck_assert_int_eq(check_page(""), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    SP_TEST_CASE(s, "metrics", 120, NULL, NULL, counter_sums_threads, counter_past_the_slots,
                 families_labels_and_escapes, histogram_buckets, collectors_share_families,
                 refused);
    return sp_test_run(s);
}
