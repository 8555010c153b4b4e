/* Internal: the metric object and the page writer shared by metrics.c
 * (the registry and updates) and metrics_out.c (families and the text
 * format). */
#ifndef SP_METRICS_INTERNAL_H
#define SP_METRICS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "slots.h"
#include "spindle/metrics.h"

struct sp_metric {
    struct sp_metric *next;
    sp_metric_type_t type;
    char *name, *help;
    char *labels; /* `a="x",b="y"`, escaped; "" for none */
    size_t nbounds;
    double bounds[SP_METRICS_MAX_BUCKETS];
    /* Per slot: a counter's count; a histogram's nbounds + 1 bucket
     * counts, then the bits of its sum (a double). */
    sp__slots_t slots;
    _Atomic uint64_t gauge; /* the bits of a gauge's double */
};

/* Whether `name` is a metric name (label: a label name). */
bool sp__metrics_name_ok(const char *name, bool label);
/* `labels` (name, value, ..., NULL) as label text, malloc'd; NULL +
 * errno (EINVAL: a bad name or a missing value; ENOMEM). */
char *sp__metrics_label_text(const char *const *labels);

/* The page being written: families in order of first appearance. */
sp_metrics_out_t *sp__metrics_out_new(void);
/* Add m's samples to the page (under the registry lock). */
void sp__metrics_out_metric(sp_metrics_out_t *out, const sp_metric_t *m);
/* Write the page to f and free it; 0 or -errno. */
int sp__metrics_out_finish(sp_metrics_out_t *out, FILE *f);

double sp__metrics_bits_double(uint64_t bits);

#endif
