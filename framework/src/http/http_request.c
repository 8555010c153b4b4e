/* Requests: the decoded target (path, query parameters) and accessors.
 * Strings live in the request's text arena and are reached by offset,
 * because the arena moves while it grows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"

/* Byte classes (SP__HTTP_*), looked up for every byte of every header
 * name and value and of every target. HOST: an RFC 3986 reg-name byte
 * (unreserved, sub-delims, '%'), or of a port or an IP literal: ':', '['
 * and ']' (RFC 9112 3.2). VALUE: all but NUL, CR and LF. */
const unsigned char sp__http_byte_class[256] = {
     0,  8,  8,  8,  8,  8,  8,  8,  8,  8,  0,  8,  8,  0,  8,  8,
     8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,  8,
     8, 15, 10,  9, 15, 13, 15, 15, 14, 14, 15, 15, 14, 15, 15, 10,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 14, 14, 10, 14, 10,  8,
    10, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 14, 10, 14, 11, 15,
    11, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 10, 11, 10, 15,  8,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
};

size_t sp__http_token_span(const char *s, size_t max)
{
    size_t n = 0;
    while (n < max && (sp__http_byte_class[(unsigned char)s[n]] & SP__HTTP_TCHAR))
        n++;
    return n;
}

bool sp__http_is_token(const char *s)
{
    size_t n = strlen(s);
    return n && sp__http_all_have(sp__http_byte_class, s, n, SP__HTTP_TCHAR);
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode text[off, off+n) onto the end of the text, NUL-terminated
 * ('+' becomes a space in query parameters). Returns the new string's
 * offset, or -1 for a bad escape, a NUL byte or no memory. */
static ssize_t copy(sp_http_request_t *r, size_t off, size_t n);

static ssize_t decode(sp_http_request_t *r, size_t off, size_t n, bool plus)
{
    const char *raw = sp__buf_data(&r->text) + off;
    if (!memchr(raw, '%', n) && !(plus && memchr(raw, '+', n)) &&
        !memchr(raw, '\0', n))
        return copy(r, off, n); /* nothing to decode: the common case */
    char *dst = sp__buf_reserve(&r->text, n + 1);
    if (!dst)
        return -1;
    const char *src = sp__buf_data(&r->text) + off; /* after the reserve */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '%') {
            int hi = i + 2 < n ? hex(src[i + 1]) : -1;
            int lo = hi >= 0 ? hex(src[i + 2]) : -1;
            if (lo < 0)
                return -1;
            c = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        if (c == '\0')
            return -1;
        dst[k++] = c;
    }
    dst[k++] = '\0';
    ssize_t at = (ssize_t)sp__buf_len(&r->text);
    sp__buf_commit(&r->text, k);
    return at;
}

/* Append n bytes, NUL-terminated: from src, or (src NULL) from the text
 * itself at off (read after the reserve, which may move it). */
static ssize_t put(sp_http_request_t *r, const char *src, size_t off, size_t n)
{
    char *dst = sp__buf_reserve(&r->text, n + 1);
    if (!dst)
        return -1;
    memcpy(dst, src ? src : sp__buf_data(&r->text) + off, n);
    dst[n] = '\0';
    ssize_t at = (ssize_t)sp__buf_len(&r->text);
    sp__buf_commit(&r->text, n + 1);
    return at;
}

/* Copy text[off, off+n) onto the end, NUL-terminated. */
static ssize_t copy(sp_http_request_t *r, size_t off, size_t n)
{
    return put(r, NULL, off, n);
}

/* One "name=value" (or "name") piece of the query at text[off, off+n). */
static int add_param(sp_http_request_t *r, size_t off, size_t n)
{
    const char *eq = memchr(sp__http_req_str(r, off), '=', n);
    size_t nlen = eq ? (size_t)(eq - sp__http_req_str(r, off)) : n;
    ssize_t name = decode(r, off, nlen, true);
    ssize_t value = name < 0 ? -1
                    : eq     ? decode(r, off + nlen + 1, n - nlen - 1, true)
                             : copy(r, off, 0);
    if (value < 0 || sp__http_kv_push(r, (size_t)name, (size_t)value) < 0)
        return -1;
    r->nparams++;
    return 0;
}

static int split_params(sp_http_request_t *r, size_t q, size_t qlen)
{
    size_t i = 0;
    while (i < qlen) {
        const char *start = sp__http_req_str(r, q + i);
        const char *amp = memchr(start, '&', qlen - i);
        size_t n = amp ? (size_t)(amp - start) : qlen - i;
        if (n && add_param(r, q + i, n) < 0)
            return -1;
        i += n + 1;
    }
    return 0;
}

/* The target is text[0, target_len): origin form "/p?q", absolute form
 * "http://h/p?q", "*" (OPTIONS) or an authority (CONNECT). */
/* Origin form, the usual case, without http_parser_parse_url: the
 * request line parser already checked its characters. */
static void split_origin(const char *t, size_t tl, size_t *plen, size_t *qoff, size_t *qlen)
{
    const char *hash = memchr(t, '#', tl);
    size_t end = hash ? (size_t)(hash - t) : tl;
    const char *q = memchr(t, '?', end);
    *plen = q ? (size_t)(q - t) : end;
    if (q) {
        *qoff = *plen + 1;
        *qlen = end - *qoff;
    }
}

bool sp__http_has_control(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= ' ' || t[i] == 0x7f)
            return true;
    return false;
}

bool sp__http_field_value_ok(const char *v)
{
    for (; *v; v++)
        if (((unsigned char)*v < ' ' && *v != '\t') || *v == 0x7f)
            return false;
    return true;
}

int sp__http_req_decode_other_target(sp_http_request_t *r)
{
    const char *t = sp__http_req_str(r, 0);
    size_t tl = r->target_len;
    size_t poff = 0, plen = tl, qoff = 0, qlen = 0;
    if (sp__http_has_control(t, tl))
        return 400;
    if (tl && t[0] == '/') {
        split_origin(t, tl, &plen, &qoff, &qlen);
    } else if (!(tl == 1 && t[0] == '*')) {
        struct http_parser_url u;
        http_parser_url_init(&u);
        if (tl == 0 || http_parser_parse_url(t, tl, r->method == SP_HTTP_CONNECT, &u))
            return 400;
        poff = u.field_data[UF_PATH].off;
        plen = (u.field_set & (1 << UF_PATH)) ? u.field_data[UF_PATH].len : 0;
        if (u.field_set & (1 << UF_QUERY)) {
            qoff = u.field_data[UF_QUERY].off;
            qlen = u.field_data[UF_QUERY].len;
        }
        if (plen && t[poff] != '/')
            return 400;
    }
    /* An absolute form without a path ("http://host") asks for "/". */
    ssize_t path = plen ? decode(r, poff, plen, false) : put(r, "/", 0, 1);
    ssize_t query = path < 0 ? -1 : copy(r, qoff, qlen);
    if (query < 0)
        return 400;
    r->path = (size_t)path;
    r->query = (size_t)query;
    return split_params(r, (size_t)query, qlen) < 0 ? 400 : 0;
}

/* ---- public accessors ----------------------------------------------------- */

sp_http_method_t sp_http_request_method(const sp_http_request_t *req)
{
    return req->method;
}

const char *sp_http_request_method_name(const sp_http_request_t *req)
{
    return http_method_str((enum http_method)req->parser.method);
}

const char *sp_http_request_target(const sp_http_request_t *req)
{
    return sp__http_req_str(req, 0);
}

const char *sp_http_request_path(const sp_http_request_t *req)
{
    return sp__http_req_str(req, req->path);
}

const char *sp_http_request_query(const sp_http_request_t *req)
{
    return sp__http_req_str(req, req->query);
}

const char *sp_http_request_param(const sp_http_request_t *req, const char *name)
{
    const sp__http_kv_t *p = sp__http_kv(req) + req->nheaders;
    for (size_t i = 0; i < req->nparams; i++)
        if (!strcmp(sp__http_req_str(req, p[i].name), name))
            return sp__http_req_str(req, p[i].value);
    return NULL;
}

size_t sp_http_request_nparams(const sp_http_request_t *req)
{
    return req->nparams;
}

static int kv_at(const sp_http_request_t *req, size_t i, const char **name,
                 const char **value)
{
    if (name)
        *name = sp__http_req_str(req, sp__http_kv(req)[i].name);
    if (value)
        *value = sp__http_req_str(req, sp__http_kv(req)[i].value);
    return 0;
}

int sp_http_request_param_at(const sp_http_request_t *req, size_t i,
                             const char **name, const char **value)
{
    return i < req->nparams ? kv_at(req, req->nheaders + i, name, value) : -ERANGE;
}

const char *sp_http_request_header(const sp_http_request_t *req, const char *name)
{
    char first = (char)(name[0] | 0x20);
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *n = sp__http_req_str(req, sp__http_kv(req)[i].name);
        if ((n[0] | 0x20) == first && !strcasecmp(n, name))
            return sp__http_req_str(req, sp__http_kv(req)[i].value);
    }
    return NULL;
}

size_t sp_http_request_nheaders(const sp_http_request_t *req)
{
    return req->nheaders;
}

int sp_http_request_header_at(const sp_http_request_t *req, size_t i,
                              const char **name, const char **value)
{
    return i < req->nheaders ? kv_at(req, i, name, value) : -ERANGE;
}

const void *sp_http_request_body(const sp_http_request_t *req, size_t *len)
{
    size_t off = req->streaming ? req->body_off : 0;
    *len = sp__buf_len(&req->body) - off;
    return *len ? (const char *)sp__buf_data(&req->body) + off : "";
}

int sp_http_request_version(const sp_http_request_t *req)
{
    return req->version;
}

bool sp_http_request_keep_alive(const sp_http_request_t *req)
{
    return sp__http_keeps_alive(req);
}

const sp_addr_t *sp_http_request_peer(const sp_http_request_t *req)
{
    return req->peer;
}

const char *sp_http_method_name(sp_http_method_t m)
{
    static const char *const names[] = {"GET",   "HEAD",    "POST",  "PUT",     "DELETE",
                                        "PATCH", "OPTIONS", "TRACE", "CONNECT", "OTHER"};
    return (unsigned)m <= SP_HTTP_OTHER ? names[m] : "OTHER";
}
