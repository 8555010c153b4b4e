/* The metrics page in the Prometheus text exposition format 0.0.4: samples
 * gathered into families (one HELP and TYPE line each, samples together),
 * names checked, help and label values escaped, numbers written so they
 * read back exactly. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

typedef struct family {
    char *name, *help;
    sp_metric_type_t type;
    char *text; /* its sample lines */
    size_t len, cap;
} family_t;

struct sp_metrics_out {
    family_t *fam;
    size_t n, cap;
    bool failed; /* out of memory: the page is refused */
};

bool sp__metrics_name_ok(const char *s, bool label)
{
    if (!*s || (label && s[0] == '_' && s[1] == '_'))
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                     (!label && c == ':');
        if (!alpha && (p == s || c < '0' || c > '9'))
            return false;
    }
    return true;
}

static void vappend(char **buf, size_t *len, size_t *cap, bool *failed,
                    const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0 && *len + (size_t)n + 1 > *cap) {
        size_t c = (*cap ? *cap : 256);
        while (c < *len + (size_t)n + 1)
            c *= 2;
        char *b = realloc(*buf, c);
        if (!b)
            n = -1;
        else {
            *buf = b;
            *cap = c;
        }
    }
    if (n < 0)
        *failed = true;
    else
        *len += (size_t)vsnprintf(*buf + *len, *cap - *len, fmt, again);
    va_end(again);
}

static void append(char **buf, size_t *len, size_t *cap, bool *failed,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vappend(buf, len, cap, failed, fmt, ap);
    va_end(ap);
}

/* s with \ and newline escaped, and " too when `quote`. */
static void escaped(char **buf, size_t *len, size_t *cap, bool *failed, const char *s,
                    bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            append(buf, len, cap, failed, "\\\\");
        else if (*s == '\n')
            append(buf, len, cap, failed, "\\n");
        else if (*s == '"' && quote)
            append(buf, len, cap, failed, "\\\"");
        else
            append(buf, len, cap, failed, "%c", *s);
    }
}

char *sp__metrics_label_text(const char *const *labels)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    bool failed = false;
    append(&buf, &len, &cap, &failed, "%s", "");
    for (size_t i = 0; labels && labels[i]; i += 2) {
        if (!labels[i + 1] || !sp__metrics_name_ok(labels[i], true) ||
            !strcmp(labels[i], "le")) {
            free(buf);
            errno = EINVAL;
            return NULL;
        }
        append(&buf, &len, &cap, &failed, "%s%s=\"", i ? "," : "", labels[i]);
        escaped(&buf, &len, &cap, &failed, labels[i + 1], true);
        append(&buf, &len, &cap, &failed, "\"");
    }
    if (failed) {
        free(buf);
        errno = ENOMEM;
        return NULL;
    }
    return buf;
}

/* A number as Prometheus reads it: the shortest text that reads back as
 * the same double, NaN, +Inf or -Inf. */
static const char *number(double v, char *buf, size_t size)
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

sp_metrics_out_t *sp__metrics_out_new(void)
{
    return calloc(1, sizeof(sp_metrics_out_t));
}

/* The family `name` (made on first sight); NULL when it has another type
 * or memory ran out. */
static family_t *family(sp_metrics_out_t *o, const char *name, const char *help,
                        sp_metric_type_t type)
{
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->fam[i].name, name))
            return o->fam[i].type == type ? &o->fam[i] : NULL;
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        family_t *f = realloc(o->fam, cap * sizeof *f);
        if (!f) {
            o->failed = true;
            return NULL;
        }
        o->fam = f;
        o->cap = cap;
    }
    family_t *f = &o->fam[o->n];
    *f = (family_t){.name = strdup(name), .help = strdup(help ? help : ""), .type = type};
    if (!f->name || !f->help) {
        free(f->name);
        free(f->help);
        o->failed = true;
        return NULL;
    }
    o->n++;
    return f;
}

/* One line: name{labels[,extra]} value. */
static void sample(sp_metrics_out_t *o, family_t *f, const char *suffix, const char *labels,
                   const char *extra, double v)
{
    char num[40];
    bool any = *labels || *extra;
    append(&f->text, &f->len, &f->cap, &o->failed, "%s%s%s%s%s%s%s %s\n", f->name, suffix,
           any ? "{" : "", labels, *labels && *extra ? "," : "", extra, any ? "}" : "",
           number(v, num, sizeof num));
}

static void histogram(sp_metrics_out_t *o, family_t *f, const char *labels,
                      const double *bounds, size_t nbounds, const uint64_t *counts,
                      double sum)
{
    char le[64], num[40];
    uint64_t total = 0;
    for (size_t b = 0; b <= nbounds; b++) {
        total += counts[b];
        snprintf(le, sizeof le, "le=\"%s\"",
                 b < nbounds ? number(bounds[b], num, sizeof num) : "+Inf");
        sample(o, f, "_bucket", labels, le, (double)total);
    }
    sample(o, f, "_sum", labels, "", sum);
    sample(o, f, "_count", labels, "", (double)total);
}

void sp__metrics_out_metric(sp_metrics_out_t *o, const sp_metric_t *m)
{
    family_t *f = family(o, m->name, m->help, m->type);
    if (!f)
        return;
    if (m->type == SP_METRIC_GAUGE) {
        sample(o, f, "", m->labels, "", sp_metrics_value(m));
    } else if (m->type == SP_METRIC_COUNTER) {
        sample(o, f, "", m->labels, "", (double)sp__slots_sum(&m->slots, 0));
    } else {
        uint64_t counts[SP_METRICS_MAX_BUCKETS + 1];
        for (size_t b = 0; b <= m->nbounds; b++)
            counts[b] = sp__slots_sum(&m->slots, b);
        double sum = 0;
        for (size_t s = 0; s < SP_METRICS_SLOTS; s++)
            sum += sp__metrics_bits_double(atomic_load_explicit(
                sp__slots_at(&m->slots, (int)s, m->nbounds + 1), memory_order_relaxed));
        histogram(o, f, m->labels, m->bounds, m->nbounds, counts, sum);
    }
}

/* The family and label text of a collector's sample; false to skip it. */
static bool emit_start(sp_metrics_out_t *o, const char *name, const char *help,
                       sp_metric_type_t type, const char *const *labels, family_t **f,
                       char **text)
{
    if (!name || !sp__metrics_name_ok(name, false) || !(*f = family(o, name, help, type)))
        return false;
    *text = sp__metrics_label_text(labels);
    if (!*text && errno == ENOMEM)
        o->failed = true;
    return *text != NULL;
}

void sp_metrics_emit(sp_metrics_out_t *o, const char *name, const char *help,
                     sp_metric_type_t type, const char *const *labels, double value)
{
    family_t *f;
    char *text;
    if (type == SP_METRIC_HISTOGRAM || !emit_start(o, name, help, type, labels, &f, &text))
        return;
    sample(o, f, "", text, "", value);
    free(text);
}

void sp_metrics_emit_histogram(sp_metrics_out_t *o, const char *name, const char *help,
                               const char *const *labels, const double *bounds,
                               size_t nbounds, const uint64_t *counts, double sum)
{
    family_t *f;
    char *text;
    if (!emit_start(o, name, help, SP_METRIC_HISTOGRAM, labels, &f, &text))
        return;
    histogram(o, f, text, bounds, nbounds, counts, sum);
    free(text);
}

static const char *const type_names[] = {"counter", "gauge", "histogram"};

int sp__metrics_out_finish(sp_metrics_out_t *o, FILE *out)
{
    int rc = o->failed ? -ENOMEM : 0;
    for (size_t i = 0; i < o->n; i++) {
        family_t *f = &o->fam[i];
        char *head = NULL;
        size_t len = 0, cap = 0;
        append(&head, &len, &cap, &o->failed, "# HELP %s ", f->name);
        escaped(&head, &len, &cap, &o->failed, f->help, false);
        append(&head, &len, &cap, &o->failed, "\n# TYPE %s %s\n", f->name,
               type_names[f->type]);
        if (!rc && (!head || fputs(head, out) < 0 ||
                    (f->len && fwrite(f->text, 1, f->len, out) != f->len)))
            rc = o->failed ? -ENOMEM : -EIO;
        free(head);
        free(f->name);
        free(f->help);
        free(f->text);
    }
    free(o->fam);
    free(o);
    if (!rc && fflush(out) != 0)
        rc = -EIO;
    return rc;
}
