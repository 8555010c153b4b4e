/* Log line patterns: compiled once into items, laid out per record on the
 * writer thread. Timestamps are local time; the broken-down time and each
 * %d item's text are cached per second, since a busy log writes many lines
 * in the same second. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log_internal.h"

enum { TIME_TEXT_MAX = 128 };

typedef struct item {
    char kind;  /* pattern letter, or 0 for literal text */
    bool left;  /* "%-5p": pad on the right */
    int width;
    char *text; /* literal text, or the strftime format of %d */
    time_t cached_sec; /* %d: text of this second, writer state */
    size_t cached_len;
    char cached[TIME_TEXT_MAX];
} item_t;

struct sp__log_pattern {
    size_t n;
    item_t items[];
};

bool sp__lbuf_put(sp__lbuf_t *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return false;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return true;
}

/* ---- compile -------------------------------------------------------------- */

static int bad(char *msg, size_t len, const char *fmt, const char *at)
{
    if (msg && len)
        snprintf(msg, len, fmt, at);
    return -EINVAL;
}

/* Parse one "%..." item at *pp (after the '%'); 0 or -EINVAL. */
static int parse_item(const char **pp, item_t *it, char *msg, size_t len)
{
    const char *p = *pp, *start = p - 1;
    it->left = *p == '-';
    if (it->left)
        p++;
    while (*p >= '0' && *p <= '9' && it->width < 1000)
        it->width = it->width * 10 + (*p++ - '0');
    if (!*p || !strchr("dqQpctFflmn%", *p))
        return bad(msg, len, "unknown pattern item '%.3s' (known: %%d %%q %%Q %%p %%c %%t "
                             "%%F %%f %%l %%m %%n %%%%)", start);
    it->kind = *p++;
    if (it->kind == '%') { /* "%%" is literal text */
        it->kind = 0;
        it->text = strdup("%");
    } else if (it->kind == 'd' && *p == '{') {
        const char *end = strchr(p, '}');
        if (!end)
            return bad(msg, len, "unterminated %s", "%d{");
        it->text = strndup(p + 1, (size_t)(end - p - 1));
        p = end + 1;
    } else if (it->kind == 'd') {
        it->text = strdup("%Y-%m-%d %H:%M:%S");
    }
    *pp = p;
    it->cached_sec = -1;
    /* Literal text and %d own a string. */
    return (it->kind == 0 || it->kind == 'd') && !it->text ? -ENOMEM : 0;
}

sp__log_pattern_t *sp__pattern_compile(const char *text, char *msg, size_t len)
{
    if (!text) {
        bad(msg, len, "%s", "no pattern");
        errno = EINVAL;
        return NULL;
    }
    /* Each '%' starts an item and may end a literal before it. */
    size_t max = 1;
    for (const char *s = text; *s; s++)
        max += 2 * (*s == '%');
    sp__log_pattern_t *p = calloc(1, sizeof *p + max * sizeof(item_t));
    int rc = p ? 0 : -ENOMEM;
    for (const char *s = text; rc == 0 && *s;) {
        item_t *it = &p->items[p->n++];
        if (*s == '%') {
            s++;
            rc = parse_item(&s, it, msg, len);
            continue;
        }
        size_t lit = strcspn(s, "%");
        it->text = strndup(s, lit);
        rc = it->text ? 0 : -ENOMEM;
        s += lit;
    }
    if (rc == 0)
        return p;
    if (rc == -ENOMEM)
        bad(msg, len, "%s", "out of memory");
    sp__pattern_free(p);
    errno = -rc;
    return NULL;
}

void sp__pattern_free(sp__log_pattern_t *p)
{
    for (size_t i = 0; p && i < p->n; i++)
        free(p->items[i].text);
    free(p);
}

/* ---- lay out ------------------------------------------------------------- */

static const char *basename_of(const char *path)
{
    const char *s = path ? strrchr(path, '/') : NULL;
    return s ? s + 1 : path ? path : "?";
}

static bool put_time(item_t *it, const struct timespec *ts, sp__lbuf_t *out)
{
    if (it->cached_sec != ts->tv_sec) {
        struct tm tm;
        localtime_r(&ts->tv_sec, &tm);
        it->cached_len = strftime(it->cached, sizeof it->cached, it->text, &tm);
        it->cached_sec = ts->tv_sec;
    }
    return sp__lbuf_put(out, it->cached, it->cached_len);
}

static bool put_fmt(sp__lbuf_t *out, const char *fmt, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, v);
    return sp__lbuf_put(out, tmp, (size_t)n);
}

static bool put_item(item_t *it, const sp__log_record_t *r, sp__lbuf_t *out)
{
    const char *s = NULL;
    switch (it->kind) {
    case 0: s = it->text; break;
    case 'd': return put_time(it, &r->ts, out);
    case 'q': return put_fmt(out, "%03" PRIu64, (uint64_t)r->ts.tv_nsec / 1000000);
    case 'Q': return put_fmt(out, "%06" PRIu64, (uint64_t)r->ts.tv_nsec / 1000);
    case 'p': s = sp_log_level_name((sp_log_level_t)r->level); break;
    case 'c': s = sp_logger_name(r->logger); break;
    case 't': return put_fmt(out, "%" PRIu64, (uint64_t)r->tid);
    case 'F': return put_fmt(out, "%" PRIu64, r->fid);
    case 'f': s = basename_of(r->file); break;
    case 'l': return put_fmt(out, "%" PRIu64, (uint64_t)(r->line < 0 ? 0 : r->line));
    case 'm': return sp__lbuf_put(out, r->msg, r->len);
    case 'n': s = "\n"; break;
    }
    return sp__lbuf_put(out, s, strlen(s));
}

/* Pad what the item wrote (from `start`) to its width. */
static bool pad(const item_t *it, sp__lbuf_t *out, size_t start)
{
    size_t wrote = out->len - start, w = (size_t)it->width;
    if (wrote >= w)
        return true;
    static const char spaces[] = "                                ";
    for (size_t need = w - wrote; need;) {
        size_t k = need < sizeof spaces - 1 ? need : sizeof spaces - 1;
        if (!sp__lbuf_put(out, spaces, k))
            return false;
        need -= k;
    }
    if (!it->left) { /* right-align: move the spaces in front */
        memmove(out->data + start + (w - wrote), out->data + start, wrote);
        memset(out->data + start, ' ', w - wrote);
    }
    return true;
}

bool sp__pattern_format(sp__log_pattern_t *p, const sp__log_record_t *r,
                        sp__lbuf_t *out)
{
    for (size_t i = 0; i < p->n; i++) {
        size_t start = out->len;
        if (!put_item(&p->items[i], r, out) || !pad(&p->items[i], out, start))
            return false;
    }
    return true;
}
