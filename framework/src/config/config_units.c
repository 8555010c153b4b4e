/* Numbers with units: durations ("1h30m", "1.5s", stored in microseconds)
 * and sizes ("16KiB", "1GB", stored in bytes). Fractions are computed from
 * their digits, not through a double, so "0.1s" is exactly 100000 us. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

typedef struct unit {
    const char *name;
    int64_t mult;
} unit_t;

static const unit_t duration_units[] = {
    {"us", 1},           {"ms", 1000},           {"s", 1000000},
    {"m", 60000000},     {"h", 3600000000LL},    {"d", 86400000000LL},
    {NULL, 0},
};

static const unit_t size_units[] = {
    {"b", 1},
    {"kb", 1000},
    {"mb", 1000000},
    {"gb", 1000000000},
    {"tb", 1000000000000LL},
    {"kib", 1LL << 10},
    {"mib", 1LL << 20},
    {"gib", 1LL << 30},
    {"tib", 1LL << 40},
    {NULL, 0},
};

/* One "<digits>[.<digits>]<unit>" term, spaces allowed around the unit. */
typedef struct term {
    uint64_t whole, frac, scale; /* value = whole + frac / scale */
    char unit[8];
} term_t;

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Scan digits into *out, keeping at most 18 (fraction digits beyond that
 * cannot matter at microsecond or byte resolution). Returns the count, or
 * -1 on overflow when `strict`. */
static int scan_digits(const char **p, uint64_t *out, uint64_t *scale,
                       bool strict)
{
    int n = 0;
    for (; isdigit((unsigned char)**p); (*p)++, n++) {
        if (n >= 18) {
            if (strict)
                return -1;
            continue;
        }
        *out = *out * 10 + (uint64_t)(**p - '0');
        if (scale)
            *scale *= 10;
    }
    return n;
}

static int scan_term(const char **pp, term_t *t)
{
    const char *p = *pp;
    memset(t, 0, sizeof *t);
    t->scale = 1;
    int nw = scan_digits(&p, &t->whole, NULL, true), nf = 0;
    if (nw < 0)
        return -ERANGE;
    if (*p == '.') {
        p++;
        nf = scan_digits(&p, &t->frac, &t->scale, false);
    }
    if (nw + nf == 0)
        return -EINVAL;
    p = skip_spaces(p);
    size_t u = 0;
    while (isalpha((unsigned char)*p) && u + 1 < sizeof t->unit)
        t->unit[u++] = (char)tolower((unsigned char)*p++);
    if (isalpha((unsigned char)*p))
        return -EINVAL;
    *pp = skip_spaces(p);
    return 0;
}

/* whole * mult + frac * mult / scale, or -ERANGE. */
static int term_value(const term_t *t, int64_t mult, int64_t *out)
{
    if (t->whole > (uint64_t)(INT64_MAX / mult))
        return -ERANGE;
    uint64_t v = t->whole * (uint64_t)mult;
    /* frac < scale <= 1e18 and mult <= 8.64e10: split to stay in 64 bits. */
    long double f = (long double)t->frac * (long double)mult / (long double)t->scale;
    if ((long double)(INT64_MAX - v) < f)
        return -ERANGE;
    *out = (int64_t)(v + (uint64_t)f);
    return 0;
}

static int64_t unit_mult(const unit_t *units, const char *name)
{
    for (const unit_t *u = units; u->name; u++)
        if (strcmp(u->name, name) == 0)
            return u->mult;
    return 0;
}

/* Sum of terms ("1h30m"), an optional sign, a bare 0 allowed. A bare number
 * is `bare_mult` units (0: not allowed). */
static int parse_units(const char *text, const unit_t *units, int64_t bare_mult,
                       bool many, int64_t *out)
{
    const char *p = skip_spaces(text);
    bool neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    int64_t total = 0;
    int terms = 0;
    do {
        term_t t;
        int rc = scan_term(&p, &t);
        if (rc < 0)
            return rc;
        int64_t mult = t.unit[0] ? unit_mult(units, t.unit) : bare_mult;
        if (!t.unit[0] && !mult && t.whole == 0 && t.frac == 0 && !*p && !terms)
            mult = 1; /* "0" needs no unit */
        if (!mult)
            return -EINVAL;
        int64_t v;
        if ((rc = term_value(&t, mult, &v)) < 0)
            return rc;
        if (v > INT64_MAX - total)
            return -ERANGE;
        total += v;
        terms++;
    } while (*p && many);
    if (*p)
        return -EINVAL;
    *out = neg ? -total : total;
    return 0;
}

int sp_parse_duration(const char *text, int64_t *us)
{
    if (!text || !us)
        return -EINVAL;
    return parse_units(text, duration_units, 0, true, us);
}

int sp_parse_size(const char *text, int64_t *bytes)
{
    if (!text || !bytes)
        return -EINVAL;
    return parse_units(text, size_units, 1, false, bytes);
}

/* ---- formatting ----------------------------------------------------------- */

/* The largest unit that divides v exactly ("90m", "4MiB"). */
static int format_with(int64_t v, const unit_t *units, size_t n,
                       const char *const *names, char *buf, size_t len)
{
    size_t i = n;
    while (--i > 0 && v % units[i].mult != 0)
        ;
    return snprintf(buf, len, "%" PRId64 "%s", v / units[i].mult, names[i]);
}

int sp__units_format(int64_t v, bool size, char *buf, size_t len)
{
    static const char *const dur_names[] = {"us", "ms", "s", "m", "h", "d"};
    static const unit_t bin[] = {{"b", 1}, {"kib", 1LL << 10}, {"mib", 1LL << 20},
                                 {"gib", 1LL << 30}, {"tib", 1LL << 40}};
    static const char *const bin_names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    static const char *const dec_names[] = {"B", "KB", "MB", "GB", "TB"};
    if (v == 0)
        return snprintf(buf, len, "%s", size ? "0B" : "0s");
    if (!size)
        return format_with(v, duration_units, 6, dur_names, buf, len);
    /* Binary units when they fit, else decimal ones ("1GB", not "976562.5KiB"). */
    if (v % 1024 == 0 || v % 1000 != 0)
        return format_with(v, bin, 5, bin_names, buf, len);
    return format_with(v, size_units, 5, dec_names, buf, len);
}
