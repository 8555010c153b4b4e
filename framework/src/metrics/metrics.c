/* The metrics registry: metric objects, their per-thread slots and the
 * updates (metrics.h). The page itself is metrics_out.c. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef struct collector {
    sp_metrics_collect_fn fn;
    void *arg;
} collector_t;

/* Registration, removal and page writes take the lock; updates never do. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sp_metric_t *metrics;
static collector_t *collectors;
static size_t ncollectors, capcollectors;

double sp__metrics_bits_double(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static uint64_t double_bits(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return bits;
}

static void bits_add(_Atomic uint64_t *c, double delta)
{
    uint64_t old = atomic_load_explicit(c, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(
        c, &old, double_bits(sp__metrics_bits_double(old) + delta),
        memory_order_relaxed, memory_order_relaxed))
        ;
}

static bool bounds_ok(const double *bounds, size_t n)
{
    if (n < 1 || n > SP_METRICS_MAX_BUCKETS)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
            return false;
    return true;
}

/* Another metric of that name with another type, or the same labels. */
static bool taken(const sp_metric_t *m)
{
    for (const sp_metric_t *o = metrics; o; o = o->next)
        if (!strcmp(o->name, m->name) &&
            (o->type != m->type || !strcmp(o->labels, m->labels)))
            return true;
    return false;
}

static void metric_free(sp_metric_t *m)
{
    if (!m)
        return;
    free(m->name);
    free(m->help);
    free(m->labels);
    sp__slots_free(&m->slots);
    free(m);
}

static sp_metric_t *make(sp_metric_type_t type, const char *name, const char *help,
                         const char *const *labels, const double *bounds, size_t nbounds)
{
    if (!name || !sp__metrics_name_ok(name, false) ||
        (type == SP_METRIC_HISTOGRAM && !bounds_ok(bounds, nbounds))) {
        errno = EINVAL;
        return NULL;
    }
    sp_metric_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->type = type;
    m->nbounds = type == SP_METRIC_HISTOGRAM ? nbounds : 0;
    if (m->nbounds)
        memcpy(m->bounds, bounds, nbounds * sizeof *bounds);
    int err = (m->labels = sp__metrics_label_text(labels)) ? 0 : errno; /* EINVAL, ENOMEM */
    m->name = strdup(name);
    m->help = strdup(help ? help : "");
    size_t values = type == SP_METRIC_HISTOGRAM ? nbounds + 2 : 1;
    if (!err && (!m->name || !m->help ||
                 (type != SP_METRIC_GAUGE && sp__slots_init(&m->slots, values) < 0)))
        err = ENOMEM;
    if (err) {
        metric_free(m);
        errno = err;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    bool dup = taken(m);
    if (!dup) {
        m->next = metrics;
        metrics = m;
    }
    pthread_mutex_unlock(&lock);
    if (dup) {
        metric_free(m);
        errno = EEXIST;
        return NULL;
    }
    return m;
}

sp_metric_t *sp_metrics_counter(const char *name, const char *help, const char *const *labels)
{
    return make(SP_METRIC_COUNTER, name, help, labels, NULL, 0);
}

sp_metric_t *sp_metrics_gauge(const char *name, const char *help, const char *const *labels)
{
    return make(SP_METRIC_GAUGE, name, help, labels, NULL, 0);
}

sp_metric_t *sp_metrics_histogram(const char *name, const char *help,
                                  const char *const *labels, const double *bounds,
                                  size_t nbounds)
{
    return make(SP_METRIC_HISTOGRAM, name, help, labels, bounds, nbounds);
}

void sp_metrics_remove(sp_metric_t *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&lock);
    for (sp_metric_t **p = &metrics; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    pthread_mutex_unlock(&lock);
    metric_free(m);
}

void sp_metrics_add(sp_metric_t *c, uint64_t n)
{
    if (c->type != SP_METRIC_COUNTER)
        return;
    sp__slots_add(&c->slots, 0, n);
}

void sp_metrics_set(sp_metric_t *g, double v)
{
    if (g->type == SP_METRIC_GAUGE)
        atomic_store_explicit(&g->gauge, double_bits(v), memory_order_relaxed);
}

void sp_metrics_gauge_add(sp_metric_t *g, double delta)
{
    if (g->type == SP_METRIC_GAUGE)
        bits_add(&g->gauge, delta);
}

void sp_metrics_observe(sp_metric_t *h, double v)
{
    if (h->type != SP_METRIC_HISTOGRAM)
        return;
    size_t b = 0;
    while (b < h->nbounds && v > h->bounds[b])
        b++;
    sp__slots_add(&h->slots, b, 1);
    int s = sp__slot();
    _Atomic uint64_t *sum = sp__slots_at(&h->slots, s, h->nbounds + 1);
    if (s == SP__SLOT_SHARED)
        bits_add(sum, v);
    else
        atomic_store_explicit(sum, double_bits(sp__metrics_bits_double(atomic_load_explicit(
                                                   sum, memory_order_relaxed)) + v),
                              memory_order_relaxed);
}

double sp_metrics_value(const sp_metric_t *m)
{
    if (!m)
        return 0;
    if (m->type == SP_METRIC_GAUGE)
        return sp__metrics_bits_double(atomic_load_explicit(&m->gauge, memory_order_relaxed));
    uint64_t n = 0;
    for (size_t b = 0; b <= m->nbounds; b++)
        n += sp__slots_sum(&m->slots, b);
    return (double)n;
}

/* ---- collectors and the page ----------------------------------------------- */

int sp_metrics_add_collector(sp_metrics_collect_fn fn, void *arg)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncollectors && !rc; i++)
        if (collectors[i].fn == fn && collectors[i].arg == arg)
            rc = -EEXIST;
    if (!rc && ncollectors == capcollectors) {
        size_t cap = capcollectors ? 2 * capcollectors : 8;
        collector_t *c = realloc(collectors, cap * sizeof *c);
        if (c) {
            collectors = c;
            capcollectors = cap;
        } else {
            rc = -ENOMEM;
        }
    }
    if (!rc)
        collectors[ncollectors++] = (collector_t){fn, arg};
    pthread_mutex_unlock(&lock);
    return rc;
}

int sp_metrics_remove_collector(sp_metrics_collect_fn fn, void *arg)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ncollectors; i++)
        if (collectors[i].fn == fn && collectors[i].arg == arg) {
            memmove(&collectors[i], &collectors[i + 1],
                    (ncollectors - i - 1) * sizeof *collectors);
            ncollectors--;
            rc = 0;
            break;
        }
    pthread_mutex_unlock(&lock);
    return rc;
}

int sp_metrics_write(FILE *f)
{
    sp_metrics_out_t *out = sp__metrics_out_new();
    if (!out)
        return -ENOMEM;
    pthread_mutex_lock(&lock);
    /* Oldest first: the list is newest first, so walk it into an order. */
    size_t n = 0;
    for (sp_metric_t *m = metrics; m; m = m->next)
        n++;
    const sp_metric_t **order = malloc((n ? n : 1) * sizeof *order);
    if (order) {
        size_t i = n;
        for (sp_metric_t *m = metrics; m; m = m->next)
            order[--i] = m;
        for (i = 0; i < n; i++)
            sp__metrics_out_metric(out, order[i]);
        for (i = 0; i < ncollectors; i++)
            collectors[i].fn(out, collectors[i].arg);
    }
    pthread_mutex_unlock(&lock);
    free(order);
    int rc = sp__metrics_out_finish(out, f);
    return order ? rc : -ENOMEM;
}
