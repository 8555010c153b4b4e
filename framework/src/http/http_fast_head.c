/* The common request head without http-parser: a complete GET or HEAD
 * head in the buffer, read in one pass into what the parser's callbacks
 * and the checks after them (http_parse.c, http_framing.c) would have
 * produced. http-parser spends about as many instructions on such a head
 * as the rest of the request's path together (bench/instructions.sh http).
 *
 * Only a strict subset is taken: an origin-form target of visible ASCII,
 * exactly "HTTP/1.1" or "HTTP/1.0", every line ending in CRLF, header names
 * that are tokens, values of tab, 0x20-0x7e and 0x80-0xff, no header that
 * frames a body or changes the protocol (Content-Length,
 * Transfer-Encoding, Upgrade, Proxy-Connection), a Connection value that
 * is "close" or "keep-alive", and every limit kept. For anything else,
 * including a head not yet complete, it declines with the request as it
 * found it, and http-parser reads the bytes as before: every refusal and
 * every limit's answer stays http-parser's and the callbacks'. The two
 * paths are compared on the same inputs by test_http_fast_head_internal
 * and fuzz_http_split. */
#include <string.h>
#include <strings.h>

#include "http_internal.h"

static const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;

/* The first byte of [q, end) that is a control (a tab too) or DEL, eight
 * at a time: the lowest byte flagged by each test is exact (a borrow only
 * runs on from a byte that is flagged itself, towards higher bytes). */
static inline const char *value_stop(const char *q, const char *end)
{
    while (end - q >= 8) {
        uint64_t x = sp__http_load_le64(q), y = x ^ (0x7f * ones);
        uint64_t m = ((x - 0x20 * ones) & ~x & highs) | ((y - ones) & ~y & highs);
        if (m)
            return q + sp__http_first_marked(m);
        q += 8;
    }
    while (q < end && (unsigned char)*q >= 0x20 && *q != 0x7f)
        q++;
    return q;
}

/* The first byte of [q, end) that is not visible ASCII (0x21-0x7e). */
static inline const char *target_stop(const char *q, const char *end)
{
    while (end - q >= 8) {
        uint64_t x = sp__http_load_le64(q);
        /* Below 0x21: the subtraction borrows; 0x7f and up: x + 1 or x has
         * the top bit (a carry only leaves a byte of 0xff, flagged). */
        uint64_t m = (((x - 0x21 * ones) & ~x) | (x + ones) | x) & highs;
        if (m)
            return q + sp__http_first_marked(m);
        q += 8;
    }
    while (q < end && (unsigned char)(*q - 0x21) < 0x5e)
        q++;
    return q;
}

/* A trimmed value equal to a lower-case word in either case (a value holds
 * no NUL: value_stop ends it at any control byte). */
static bool value_is(const char *v, size_t n, const char *lower, size_t ln)
{
    return n == ln && !strncasecmp(v, lower, ln);
}

enum { CONN_CLOSE = 1, CONN_KEEP = 2, DECLINE = -1 };

/* Whether a name starts with a lower-case word (ASCII letters in either
 * case, and '-'). */
static inline bool starts(const char *name, size_t nl, const char *lower, size_t ln)
{
    return nl >= ln && sp__http_named_n(name, ln, lower, ln);
}

/* What one header means here: 0, a status that refuses the request (the
 * caller notes it and reads on: the checks run once every header is read,
 * so a later decline, or a limit, still comes first), or DECLINE.
 * http-parser reads the names that frame a body or decide the
 * connection's fate itself, and reads some by their start (2.9 takes any
 * name that begins with "Transfer-Encoding" as that header): those it
 * keeps, but for a Connection of "close" or "keep-alive". */
static int header_seen(sp_http_request_t *r, const char *name, size_t nl, const char *v,
                       size_t vl, int *host, unsigned *conn)
{
    switch (name[0] | 0x20) {
    case 'c':
        if (nl == 10 && sp__http_named_n(name, nl, "connection", 10)) {
            if (value_is(v, vl, "close", 5))
                *conn |= CONN_CLOSE;
            else if (value_is(v, vl, "keep-alive", 10))
                *conn |= CONN_KEEP;
            else
                return DECLINE; /* a token list, "upgrade"...: http-parser's */
            return 0;
        }
        return starts(name, nl, "connection", 10) || starts(name, nl, "content-length", 14)
                   ? DECLINE
                   : 0;
    case 'e':
        if (nl == 6 && sp__http_named_n(name, nl, "expect", 6))
            r->expect_continue = r->version == 11 && value_is(v, vl, "100-continue", 12);
        return 0;
    case 'h':
        if (nl == 4 && sp__http_named_n(name, nl, "host", 4) &&
            (++*host > 1 || !sp__http_all_have(sp__http_byte_class, v, vl, SP__HTTP_HOST)))
            return 400;
        return 0;
    case 'p':
        return starts(name, nl, "proxy-connection", 16) ? DECLINE : 0;
    case 't':
        return starts(name, nl, "transfer-encoding", 17) ? DECLINE : 0;
    case 'u':
        return starts(name, nl, "upgrade", 7) ? DECLINE : 0;
    default:
        return 0;
    }
}

/* Append "\0name\0value" to the text and its offsets to the header table,
 * as the callbacks lay them out. */
static bool header_add(sp_http_request_t *r, const char *name, size_t nl, const char *v,
                       size_t vl)
{
    char *dst = sp__buf_reserve(&r->text, nl + vl + 2);
    if (!dst)
        return false;
    size_t at = sp__buf_len(&r->text);
    dst[0] = '\0';
    memcpy(dst + 1, name, nl);
    dst[nl + 1] = '\0';
    memcpy(dst + nl + 2, v, vl);
    sp__buf_commit(&r->text, nl + vl + 2);
    return sp__http_kv_push(r, at + 1, at + nl + 2) == 0;
}

/* The request line: method, target (copied into the empty text), version.
 * Where the header lines start, or NULL to decline. */
static const char *request_line(sp_http_request_t *r, const char *p, const char *end)
{
    const char *q;
    if (end - p >= 4 && !memcmp(p, "GET ", 4)) {
        r->parser.method = HTTP_GET;
        q = p + 4;
    } else if (end - p >= 5 && !memcmp(p, "HEAD ", 5)) {
        r->parser.method = HTTP_HEAD;
        q = p + 5;
    } else {
        return NULL;
    }
    const char *target = q;
    if (q == end || *q != '/')
        return NULL;
    q = target_stop(q + 1, end);
    size_t tl = (size_t)(q - target);
    if (end - q < 11 || *q != ' ' || tl > r->opts->max_request_line)
        return NULL;
    uint64_t ver = sp__http_load_le64(q + 1), v11 = sp__http_load_le64("HTTP/1.1");
    if ((ver != v11 && ver != sp__http_load_le64("HTTP/1.0")) || q[9] != '\r' ||
        q[10] != '\n')
        return NULL;
    if (sp__buf_append(&r->text, target, tl) < 0)
        return NULL;
    r->target_len = tl;
    r->version = ver == v11 ? 11 : 10;
    return q + 11;
}

/* The header lines from q to the blank line; where the head ends, or NULL
 * to decline. *status: the first refusal met. */
static const char *header_lines(sp_http_request_t *r, const char *q, const char *end,
                                int *status, int *host, unsigned *conn)
{
    for (;;) {
        if (end - q < 2)
            return NULL;
        if (q[0] == '\r')
            return q[1] == '\n' ? q + 2 : NULL;
        const char *name = q;
        while (q < end && (sp__http_byte_class[(unsigned char)*q] & SP__HTTP_TCHAR))
            q++;
        if (q == end || *q != ':' || q == name)
            return NULL;
        size_t nl = (size_t)(q - name);
        for (q++; q < end && (*q == ' ' || *q == '\t'); q++)
            ;
        const char *v = q;
        while ((q = value_stop(q, end)) < end && *q == '\t')
            q++;
        if (end - q < 2 || q[0] != '\r' || q[1] != '\n')
            return NULL;
        size_t vl = (size_t)(q - v);
        q += 2;
        /* Counted as the callbacks count: name, value with its trailing
         * blanks, ": " and CRLF. */
        r->header_bytes += nl + vl + 4;
        if (++r->nheaders > (size_t)r->opts->max_headers ||
            r->header_bytes > r->opts->max_header_size)
            return NULL;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        int seen = header_seen(r, name, nl, v, vl, host, conn);
        if (seen == DECLINE || !header_add(r, name, nl, v, vl))
            return NULL;
        if (seen && !*status)
            *status = seen;
    }
}

size_t sp__http_fast_head(sp_http_request_t *r, const char *p, size_t n,
                          sp__http_state_t *state)
{
    const char *end = p + n, *q;
    int status = 0, host = 0, version = r->version;
    unsigned conn = 0, method = r->parser.method;
    if (!(q = request_line(r, p, end)) ||
        !(q = header_lines(r, q, end, &status, &host, &conn)) ||
        (size_t)(q - p) > HTTP_MAX_HEADER_SIZE / 2 || /* far from its own limit */
        sp__buf_append(&r->text, "", 1) < 0) {
        /* As found: an empty request, for http-parser. */
        sp__buf_clear(&r->text);
        sp__buf_clear(&r->kvs);
        r->target_len = r->header_bytes = r->nheaders = 0;
        r->expect_continue = false;
        r->version = version;
        r->parser.method = method;
        return 0;
    }
    r->begun = r->target_done = true;
    r->last = r->nheaders ? SP__LAST_VALUE : SP__LAST_NONE;
    r->scan = r->head_end = q;
    r->feed_end = end;
    r->method = r->parser.method == HTTP_GET ? SP_HTTP_GET : SP_HTTP_HEAD;
    r->parser.http_major = 1;
    r->parser.http_minor = r->version == 11;
    if (!status && r->version == 11 && !host)
        status = 400;
    if (!status)
        status = sp__http_req_decode_target(r);
    if (status) {
        r->error = status;
        *state = SP__HTTP_FAILED;
        return (size_t)(q - p);
    }
    r->keep_alive = r->version == 11 ? !(conn & CONN_CLOSE) : (conn & CONN_KEEP) != 0;
    r->headers_done = r->complete = true;
    *state = SP__HTTP_DONE;
    return (size_t)(q - p);
}
