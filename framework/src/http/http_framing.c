/* The checks http-parser 2.9.4 leaves out (Debian builds it without its
 * strict mode): line ends and chunk framing byte by byte, and the header
 * lines that decide a message's length (request smuggling defences). Each
 * refusal stops the parse with its status (sp__http_fail). */
#include <string.h>
#include <strings.h>

#include "http_internal.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
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
 * would not). memchr keeps this cheap: CRs and LFs are few. */
static int check_lines_strict(sp_http_request_t *r, const char *from, const char *to)
{
    if (from == to)
        return 0;
    /* The previous range ended with a CR, or with a line end. */
    if (r->cr_open != (*from == '\n') || (r->lf_open && is_blank(*from)))
        return sp__http_fail(r, 400);
    for (const char *q = from; (q = memchr(q, '\r', (size_t)(to - q))); q++)
        if (q + 1 < to && q[1] != '\n')
            return sp__http_fail(r, 400);
    for (const char *q = from; (q = memchr(q, '\n', (size_t)(to - q))); q++) {
        if ((q > from && q[-1] != '\r') || (q + 1 < to && is_blank(q[1])))
            return sp__http_fail(r, 400);
    }
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
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = '\0';
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

/* RFC 9112 3.2: a Host value is uri-host [":" port]: RFC 3986 reg-name
 * characters (unreserved, sub-delims, '%'), or an IP literal in brackets.
 * Empty is allowed (a target without authority). */
static bool valid_host(const char *v)
{
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || (c && strchr("-._~!$&'()*+,;=%:[]", c));
        if (!ok)
            return false;
    }
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
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *name = base + sp__http_kv(r)[i].name;
        char *value = base + sp__http_kv(r)[i].value;
        sp__http_trim_value(value);
        size_t n = sp__http_token_len(name);
        if (!n)
            return 400; /* "Content Length" must not pass as some header */
        if (n == 14 && sp__http_named(name, "content-length")) {
            if (++cl > 1 || !all_digits(value))
                return 400;
        } else if (n == 17 && sp__http_named(name, "transfer-encoding")) {
            if (++te > 1 || strcasecmp(value, "chunked"))
                return 400;
        } else if (n == 4 && sp__http_named(name, "host")) {
            if (++host > 1 || !valid_host(value))
                return 400;
        } else if (n == 6 && sp__http_named(name, "expect")) {
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
