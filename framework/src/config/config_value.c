/* Configuration value types: parsing from text and YAML nodes, bounds,
 * canonical formatting, equality. Lists and maps are single heap blocks
 * (header, pointer arrays, then the strings) so one free() releases them
 * and one pointer publishes them. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

static int fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return -1;
}

bool sp__type_is_scalar(sp_cvar_type_t t)
{
    return t != SP_CVAR_STRING && t != SP_CVAR_LIST && t != SP_CVAR_MAP;
}

const char *sp__type_name(sp_cvar_type_t t)
{
    static const char *const names[] = {"integer", "number", "boolean",
                                        "string",  "duration", "size",
                                        "list",    "map"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- scalars ------------------------------------------------------------ */

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static int parse_int(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || isspace((unsigned char)*text))
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *out = v;
    return 0;
}

static int parse_float(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || isspace((unsigned char)*text) || !isfinite(v))
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0)
            return *out = true, 0;
        if (strcasecmp(text, no[i]) == 0)
            return *out = false, 0;
    }
    return -EINVAL;
}

/* ---- strings, lists, maps ------------------------------------------------ */

/* One block: `header` bytes, then n string pointers, then the strings. The
 * pointer array is returned through *arr. */
static void *pack(size_t header, const char *const *strs, size_t n,
                  const char ***arr)
{
    size_t bytes = header + n * sizeof(char *);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(strs[i]) + 1;
    char *block = malloc(bytes);
    if (!block)
        return NULL;
    const char **ptrs = (const char **)(void *)(block + header);
    char *data = (char *)(ptrs + n);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(strs[i]) + 1;
        memcpy(data, strs[i], l);
        ptrs[i] = data;
        data += l;
    }
    *arr = ptrs;
    return block;
}

int sp__value_string(const char *s, sp_cvalue_t *out)
{
    char *copy = strdup(s ? s : "");
    if (!copy)
        return -ENOMEM;
    out->type = SP_CVAR_STRING;
    out->u.s = copy;
    return 0;
}

int sp__value_list(const char *const *items, size_t n, sp_cvalue_t *out)
{
    const char **arr;
    sp_strlist_t *l = pack(sizeof *l, items, n, &arr);
    if (!l)
        return -ENOMEM;
    l->n = n;
    l->items = arr;
    out->type = SP_CVAR_LIST;
    out->u.list = l;
    return 0;
}

/* kv is key, value, key, value...; the caller made sure keys are unique
 * (the YAML loader checks every mapping). */
int sp__value_map(const char *const *kv, size_t n, sp_cvalue_t *out)
{
    const char **split = malloc((2 * n + 1) * sizeof *split);
    if (!split)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        split[i] = kv[2 * i];
        split[n + i] = kv[2 * i + 1];
    }
    const char **arr;
    sp_strmap_t *m = pack(sizeof *m, split, 2 * n, &arr);
    free(split);
    if (!m)
        return -ENOMEM;
    m->n = n;
    m->keys = arr;
    m->values = arr + n;
    out->type = SP_CVAR_MAP;
    out->u.map = m;
    return 0;
}

const char *sp_strmap_get(const sp_strmap_t *m, const char *key)
{
    for (size_t i = 0; m && key && i < m->n; i++)
        if (strcmp(m->keys[i], key) == 0)
            return m->values[i];
    return NULL;
}

/* A list or map node as a list or map value. A map's texts are collected
 * as key, value, key, value... */
static int compound_from_node(sp_cvar_type_t t, const sp_cnode_t *n, sp_cvalue_t *out,
                              const sp_cnode_t **at, char *msg, size_t len)
{
    bool map = t == SP_CVAR_MAP;
    if (n->kind != (map ? SP_CNODE_MAP : SP_CNODE_LIST))
        return fail(msg, len, map ? "expected a mapping" : "expected a list");
    size_t per = map ? 2 : 1;
    const char **texts = malloc((per * n->n + 1) * sizeof *texts);
    if (!texts)
        return fail(msg, len, "out of memory");
    for (size_t i = 0; i < n->n; i++) {
        if (n->items[i]->kind != SP_CNODE_SCALAR) {
            free(texts);
            *at = n->items[i];
            return fail(msg, len, map ? "map values must be scalars"
                                      : "list items must be scalars");
        }
        if (map)
            texts[2 * i] = n->keys[i]->text;
        texts[per * i + per - 1] = n->items[i]->text;
    }
    int rc = map ? sp__value_map(texts, n->n, out) : sp__value_list(texts, n->n, out);
    free(texts);
    return rc < 0 ? fail(msg, len, "out of memory") : 0;
}

/* A list written as "a, b, c" on the command line or in the environment. */
static int list_from_commas(const char *text, sp_cvalue_t *out)
{
    char *copy = strdup(text);
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    const char **items = malloc(cap * sizeof *items);
    size_t n = 0;
    if (!copy || !items) {
        free(copy);
        free(items);
        return -ENOMEM;
    }
    char *p = copy;
    while (*skip_spaces(p)) {
        char *comma = strchr(p, ',');
        char *end = comma ? comma : p + strlen(p);
        p = (char *)skip_spaces(p);
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        *end = '\0';
        items[n++] = p;
        if (!comma)
            break;
        p = comma + 1;
    }
    int rc = sp__value_list(items, n, out);
    free(copy);
    free(items);
    return rc;
}

/* A list or map given as text: YAML flow syntax ("[a, b]", "{k: v}"). */
static int compound_from_text(sp_cvar_type_t t, const char *text,
                              sp_cvalue_t *out, char *msg, size_t len)
{
    const char *p = skip_spaces(text);
    if (t == SP_CVAR_LIST && *p != '[')
        return list_from_commas(text, out) < 0 ? fail(msg, len, "out of memory") : 0;
    if (t == SP_CVAR_MAP && *p != '{')
        return fail(msg, len, "expected a mapping such as {key: value}, got '%s'", text);
    sp__arena_t a = {0};
    sp_config_report_t r = {0};
    const sp_cnode_t *root, *at = NULL;
    int rc = sp__yaml_parse(&a, "value", text, strlen(text), &root, &r);
    if (rc == 0 && !root)
        rc = fail(msg, len, "empty value");
    else if (rc < 0)
        fail(msg, len, "%s", r.text ? r.text + strlen("value:") : "malformed value");
    else
        rc = compound_from_node(t, root, out, &at, msg, len);
    free(r.text);
    sp__arena_free(&a);
    if (rc < 0) /* a YAML message ends in a newline */
        msg[strcspn(msg, "\n")] = '\0';
    return rc < 0 ? -1 : 0;
}

/* ---- parse, check ------------------------------------------------------- */

static int scalar_from_text(sp_cvar_type_t t, const char *text, sp_cvalue_t *out,
                            char *msg, size_t len)
{
    int rc = -EINVAL;
    out->type = t;
    switch (t) {
    case SP_CVAR_INT: rc = parse_int(text, &out->u.i); break;
    case SP_CVAR_FLOAT: rc = parse_float(text, &out->u.f); break;
    case SP_CVAR_BOOL: rc = parse_bool(text, &out->u.b); break;
    case SP_CVAR_DURATION: rc = sp_parse_duration(text, &out->u.i); break;
    case SP_CVAR_SIZE: rc = sp_parse_size(text, &out->u.i); break;
    default: break;
    }
    if (rc == -ERANGE)
        return fail(msg, len, "'%s' is too large for a %s", text, sp__type_name(t));
    if (rc < 0) {
        static const char *const hints[] = {
            [SP_CVAR_BOOL] = " (true/false, yes/no, on/off, 1/0)",
            [SP_CVAR_DURATION] = " such as 30s, 250ms, 1.5h or 1h30m (units us, ms, "
                                 "s, m, h, d)",
            [SP_CVAR_SIZE] = " such as 512, 16KiB or 1GB (units B, KB, MB, GB, TB, "
                             "KiB, MiB, GiB, TiB)",
        };
        const char *hint = (size_t)t < sizeof hints / sizeof hints[0] && hints[t]
                               ? hints[t]
                               : "";
        const char *article = t == SP_CVAR_INT ? "an" : "a";
        return fail(msg, len, "expected %s %s%s, got '%s'", article, sp__type_name(t),
                    hint, text);
    }
    return 0;
}

int sp__value_parse(sp_cvar_type_t t, const char *text, sp_cvalue_t *out,
                    char *msg, size_t len)
{
    if (t == SP_CVAR_STRING)
        return sp__value_string(text, out) < 0 ? fail(msg, len, "out of memory") : 0;
    if (t == SP_CVAR_LIST || t == SP_CVAR_MAP)
        return compound_from_text(t, text, out, msg, len);
    return scalar_from_text(t, text, out, msg, len);
}

int sp__value_check(const sp_cvar_t *v, const sp_cvalue_t *val, char *msg,
                    size_t len)
{
    bool in_range = true;
    if (v->type == SP_CVAR_FLOAT)
        in_range = val->u.f >= v->fmin && val->u.f <= v->fmax;
    else if (sp__type_is_scalar(v->type) && v->type != SP_CVAR_BOOL)
        in_range = val->u.i >= v->imin && val->u.i <= v->imax;
    if (!in_range) {
        char got[64], lo[64], hi[64];
        sp_cvalue_t b = {.type = v->type};
        sp__value_format(val, got, sizeof got);
        if (v->type == SP_CVAR_FLOAT)
            b.u.f = v->fmin;
        else
            b.u.i = v->imin;
        sp__value_format(&b, lo, sizeof lo);
        if (v->type == SP_CVAR_FLOAT)
            b.u.f = v->fmax;
        else
            b.u.i = v->imax;
        sp__value_format(&b, hi, sizeof hi);
        return fail(msg, len, "%s is out of range [%s, %s]", got, lo, hi);
    }
    if (v->check && v->check(val, msg, len, v->check_arg) != 0)
        return -1;
    return 0;
}

int sp__value_from_text(const sp_cvar_t *v, const char *text, sp_cvalue_t *out,
                        char *msg, size_t len)
{
    if (sp__value_parse(v->type, text, out, msg, len) < 0)
        return -1;
    if (sp__value_check(v, out, msg, len) < 0) {
        sp__value_free(out);
        return -1;
    }
    return 0;
}

int sp__value_from_node(const sp_cvar_t *v, const sp_cnode_t *n, sp_cvalue_t *out,
                        const sp_cnode_t **at, char *msg, size_t len)
{
    static const char *const kinds[] = {"a scalar", "a list", "a mapping"};
    *at = n;
    int rc;
    if (v->type == SP_CVAR_LIST || v->type == SP_CVAR_MAP)
        rc = compound_from_node(v->type, n, out, at, msg, len);
    else if (n->kind != SP_CNODE_SCALAR)
        return fail(msg, len, "expected %s %s, got %s",
                    v->type == SP_CVAR_INT ? "an" : "a", sp__type_name(v->type),
                    kinds[n->kind]);
    else
        rc = sp__value_parse(v->type, n->text, out, msg, len);
    if (rc < 0)
        return -1;
    if (sp__value_check(v, out, msg, len) < 0) {
        sp__value_free(out);
        return -1;
    }
    return 0;
}

/* ---- equality, ownership ------------------------------------------------ */

static bool strs_equal(const char *const *a, const char *const *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

bool sp__value_equal(const sp_cvalue_t *a, const sp_cvalue_t *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case SP_CVAR_FLOAT: return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0;
    case SP_CVAR_BOOL: return a->u.b == b->u.b;
    case SP_CVAR_STRING: return strcmp(a->u.s, b->u.s) == 0;
    case SP_CVAR_LIST:
        return a->u.list->n == b->u.list->n &&
               strs_equal(a->u.list->items, b->u.list->items, a->u.list->n);
    case SP_CVAR_MAP:
        return a->u.map->n == b->u.map->n &&
               strs_equal(a->u.map->keys, b->u.map->keys, 2 * a->u.map->n);
    default: return a->u.i == b->u.i;
    }
}

void *sp__value_object(const sp_cvalue_t *v)
{
    switch (v->type) {
    case SP_CVAR_STRING: return (void *)v->u.s;
    case SP_CVAR_LIST: return (void *)v->u.list;
    case SP_CVAR_MAP: return (void *)v->u.map;
    default: return NULL;
    }
}

void sp__value_free(sp_cvalue_t *v)
{
    free(sp__value_object(v));
    memset(&v->u, 0, sizeof v->u);
}

/* ---- formatting --------------------------------------------------------- */

typedef struct out {
    char *buf;
    size_t len, pos;
} out_t;

static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->pos < o->len ? o->len - o->pos : 0;
    int n = vsnprintf(o->buf + (o->pos < o->len ? o->pos : o->len - 1), room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->pos += (size_t)n;
}

/* Plain YAML scalars that read back as the same string; others are
 * double-quoted with escapes. */
static void put_string(out_t *o, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = isalnum((unsigned char)*p) || strchr("_./+-", *p);
    if (plain) {
        put(o, "%s", s);
        return;
    }
    put(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            put(o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            put(o, "\\x%02x", *p);
        else
            put(o, "%c", *p);
    }
    put(o, "\"");
}

static void put_units(out_t *o, int64_t v, bool size)
{
    char tmp[32];
    sp__units_format(v, size, tmp, sizeof tmp);
    put(o, "%s", tmp);
}

static void put_float(out_t *o, double f)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.15g", f);
    if (strtod(tmp, NULL) != f)
        snprintf(tmp, sizeof tmp, "%.17g", f);
    put(o, "%s", tmp);
}

/* YAML flow syntax: "[a, b]", or with keys "{k: a, l: b}". */
static void put_flow(out_t *o, const char *const *keys, const char *const *vals, size_t n)
{
    put(o, keys ? "{" : "[");
    for (size_t i = 0; i < n; i++) {
        put(o, i ? ", " : "");
        if (keys) {
            put_string(o, keys[i]);
            put(o, ": ");
        }
        put_string(o, vals[i]);
    }
    put(o, keys ? "}" : "]");
}

size_t sp__value_format(const sp_cvalue_t *v, char *buf, size_t len)
{
    out_t o = {buf, len, 0};
    buf[0] = '\0';
    switch (v->type) {
    case SP_CVAR_INT: put(&o, "%" PRId64, v->u.i); break;
    case SP_CVAR_FLOAT: put_float(&o, v->u.f); break;
    case SP_CVAR_BOOL: put(&o, "%s", v->u.b ? "true" : "false"); break;
    case SP_CVAR_STRING: put_string(&o, v->u.s); break;
    case SP_CVAR_DURATION: put_units(&o, v->u.i, false); break;
    case SP_CVAR_SIZE: put_units(&o, v->u.i, true); break;
    case SP_CVAR_LIST: put_flow(&o, NULL, v->u.list->items, v->u.list->n); break;
    case SP_CVAR_MAP: put_flow(&o, v->u.map->keys, v->u.map->values, v->u.map->n); break;
    }
    return o.pos;
}
