/* The checks http-parser 2.9.4 leaves out (Debian builds it without its
 * strict mode): line ends and chunk framing byte by byte, and the header
 * lines that decide a message's length (request smuggling defences). Each
 * refusal stops the parse with its status (sp__http_fail). */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Drop the trailing blanks of the n-byte value v: its new length. */
static size_t trim_to(char *v, size_t n)
{
    while (n && is_blank(v[n - 1]))
        v[--n] = '\0';
    return n;
}

/* A CR or LF at q in [from, to) that breaks the rule below. */
static bool bad_line_byte(const char *q, const char *from, const char *to)
{
    if (*q == '\r')
        return q + 1 < to && q[1] != '\n';
    if (*q == '\n')
        return (q > from && q[-1] != '\r') || (q + 1 < to && is_blank(q[1]));
    return false;
}

/* The high bit of every byte of x below 0x0e (CR, LF and rarer controls),
 * and maybe of a byte after one (a borrow): never fewer. */
static uint64_t low_bytes(uint64_t x)
{
    return (x - 0x0e0e0e0e0e0e0e0eull) & ~x & 0x8080808080808080ull;
}

/* Line ends in a request, and in a chunked body's framing: CRLF exactly,
 * and no line that starts with a blank. A bare LF or CR is where two
 * parties may end a line differently ("X-A: 1\nTransfer-Encoding: chunked"
 * hides the coding from one that does not end the line there; "5;a\nhello"
 * frames chunk data differently), and a blank at a line's start is
 * obsolete folding, also after an empty first line ("Content-Length:\r\n
 * 40"), which RFC 9112 5.2 lets a server refuse, as nginx does. RFC 9112
 * 2.2 allows a bare LF; refusing it keeps the verdict the same however
 * reads split the bytes (a rule that depends on what the headers said
 * would not). Every request's head passes here, so it is read eight bytes
 * at a time, and only bytes that may be a CR or LF are looked at. */
static int check_lines_strict(sp_http_request_t *r, const char *from, const char *to)
{
    if (from == to)
        return 0;
    /* The previous range ended with a CR, or with a line end. */
    if (r->cr_open != (*from == '\n') || (r->lf_open && is_blank(*from)))
        return sp__http_fail(r, 400);
    const char *q = from, *words_end = from + ((size_t)(to - from) & ~(size_t)7);
    for (; q != words_end; q += 8)
        for (uint64_t m = low_bytes(sp__http_load_le64(q)); m; m &= m - 1) {
            unsigned k = sp__http_first_marked(m);
            const char *p = q + k;
            if (*p == '\r' && p + 1 < to && p[1] == '\n') {
                /* A line end, checked as one: its LF's mark, next to the
                 * CR's, goes with it (in the next eight bytes, the LF is
                 * checked as any other). */
                if (p + 2 < to && is_blank(p[2]))
                    return sp__http_fail(r, 400);
                if (k < 7)
                    m &= m - 1;
            } else if (bad_line_byte(p, from, to)) {
                return sp__http_fail(r, 400);
            }
        }
    for (; q < to; q++)
        if (bad_line_byte(q, from, to))
            return sp__http_fail(r, 400);
    r->cr_open = to[-1] == '\r';
    r->lf_open = to[-1] == '\n';
    return 0;
}

/* Check the framing bytes [from, to) (all but body data). http-parser,
 * built without strict checks (Debian's), takes any byte after a CR as its
 * LF, so "Host: x\r\n\rZ" or "5\rZ" would frame a message differently from
 * a server that checks (request smuggling). A response's header lines only
 * need a CR to be followed by LF: old servers end lines with a bare LF. */
int sp__http_check_framing(sp_http_request_t *r, const char *from, const char *to)
{
    if (r->parser.type == HTTP_REQUEST || (r->headers_done && (r->parser.flags & F_CHUNKED)))
        return check_lines_strict(r, from, to);
    while (from < to) {
        if (r->cr_open) {
            if (*from++ != '\n')
                return sp__http_fail(r, 400);
            r->cr_open = false;
            continue;
        }
        const char *cr = memchr(from, '\r', (size_t)(to - from));
        if (!cr)
            break;
        r->cr_open = true;
        from = cr + 1;
    }
    return 0;
}

/* A response's header lines (up to the end of its blank line) are checked
 * by the lenient rule before its chunked framing is checked by the strict
 * one, wherever reads split them: the lines up to the last header piece
 * seen in this feed, then the run of line-end bytes that follows. */
int sp__http_check_response_head(sp_http_request_t *r)
{
    const char *end = r->head_end ? r->head_end : r->scan;
    while (end < r->feed_end && (*end == '\r' || *end == '\n'))
        end++;
    if (sp__http_check_framing(r, r->scan, end) < 0)
        return -1;
    r->scan = end;
    return 0;
}

/* A value loses its trailing blanks (http-parser drops the leading ones). */
void sp__http_trim_value(char *v)
{
    trim_to(v, strlen(v));
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* One pass over the header lines: trim the values, note Expect, and the
 * request smuggling defences (http-parser 2.9.4 lets some of these
 * through). A message whose length two parties could read differently is
 * refused: several Content-Length lines (even equal ones), Content-Length
 * with Transfer-Encoding, several Transfer-Encoding lines or any coding but
 * a lone "chunked". HTTP/1.1 needs one Host. */
int sp__http_check_headers(sp_http_request_t *r)
{
    int cl = 0, te = 0, host = 0;
    char *base = sp__buf_data(&r->text);
    const sp__http_kv_t *kv = sp__http_kv(r);
    for (size_t i = 0; i < r->nheaders; i++) {
        /* Name and value follow each other NUL-terminated, and the text
         * ends with the last value: the lengths need no strlen. */
        const char *name = base + kv[i].name;
        char *value = base + kv[i].value;
        size_t n = kv[i].value - kv[i].name - 1;
        size_t end = i + 1 < r->nheaders ? kv[i + 1].name : sp__buf_len(&r->text);
        size_t vl = trim_to(value, end - kv[i].value - 1);
        if (!n || !sp__http_all_have(sp__http_byte_class, name, n, SP__HTTP_TCHAR))
            return 400; /* "Content Length" must not pass as some header */
        if (sp__http_named_n(name, n, "content-length", 14)) {
            if (++cl > 1 || !all_digits(value))
                return 400;
        } else if (sp__http_named_n(name, n, "transfer-encoding", 17)) {
            if (++te > 1 || strcasecmp(value, "chunked"))
                return 400;
        } else if (sp__http_named_n(name, n, "host", 4)) {
            /* RFC 9112 3.2: uri-host [":" port]; empty for a target
             * without authority. */
            if (++host > 1 || !sp__http_all_have(sp__http_byte_class, value, vl, SP__HTTP_HOST))
                return 400;
        } else if (sp__http_named_n(name, n, "expect", 6)) {
            r->expect_continue = r->version == 11 && !strcasecmp(value, "100-continue");
        }
    }
/* HTTP/1.0 has no chunked coding: its framing is faulty (RFC 9112 6.1). */
    if ((cl && te) || (te && r->version == 10) || (r->version == 11 && host == 0))
        return 400;
    return 0;
}

/* Bytes the feed must start with: the rest of a chunk's closing CRLF. */
int sp__http_check_crlf_due(sp_http_request_t *r, const char *p, const char *end)
{
    for (; r->crlf_due && p < end; p++, r->crlf_due--)
        if (*p != "\r\n"[2 - r->crlf_due])
            return sp__http_fail(r, 400);
    return 0;
}
