/* http-parser glue: callbacks that collect a request into its text arena,
 * enforce our limits, and stop at the end of each message.
 *
 * http-parser may deliver a token (target, header name, value) in several
 * pieces, split wherever a read ended, so pieces are appended to the text
 * and a token ends when the next kind of token starts. Each token is
 * NUL-terminated in place. The parser pauses in on_message_complete, never
 * earlier (pausing in on_headers_complete leaves a byte unconsumed), so
 * the bytes after a request stay in the connection's buffer for the next
 * one: that is what makes pipelining work.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"

static http_parser_settings settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static sp_http_request_t *req_of(http_parser *p)
{
    return p->data;
}

/* Stop the parser with this status: returning non-zero from a callback
 * makes http_parser_execute fail with HPE_CB_*. */
static int fail(sp_http_request_t *r, int status)
{
    r->error = status;
    return -1;
}

static int text_add(sp_http_request_t *r, const char *p, size_t n)
{
    return sp__buf_append(&r->text, p, n) < 0 ? fail(r, 500) : 0;
}

/* End the token being collected with a NUL. */
static int text_end(sp_http_request_t *r)
{
    return text_add(r, "", 1);
}

static int on_message_begin(http_parser *p)
{
    req_of(p)->begun = true;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    r->target_len += n;
    if (r->target_len > r->opts->max_request_line)
        return fail(r, 414);
    return text_add(r, at, n);
}

/* Header bytes count against max_header_size, trailers of a chunked body
 * too (they are not kept). */
static int count_header_bytes(sp_http_request_t *r, size_t n)
{
    r->header_bytes += n;
    return r->header_bytes > r->opts->max_header_size ? fail(r, 431) : 0;
}

static int new_header(sp_http_request_t *r)
{
    if (r->nheaders >= (size_t)r->opts->max_headers)
        return fail(r, 431);
    /* The target or the previous value ends here. */
    if (text_end(r) < 0)
        return -1;
    r->target_done = true;
    if (sp__http_kv_push(r, sp__buf_len(&r->text), 0) < 0)
        return fail(r, 500);
    r->nheaders++;
    r->header_bytes += 4; /* ": " and CRLF, as on the wire */
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    if (count_header_bytes(r, n) < 0)
        return -1;
    if (r->headers_done)
        return 0; /* a trailer */
    if (r->last != SP__LAST_FIELD) {
        if (new_header(r) < 0)
            return -1;
        r->last = SP__LAST_FIELD;
    }
    return text_add(r, at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    if (count_header_bytes(r, n) < 0)
        return -1;
    if (r->headers_done)
        return 0;
    if (r->last != SP__LAST_VALUE) {
        if (text_end(r) < 0) /* the name ends */
            return -1;
        sp__http_kv(r)[r->nheaders - 1].value = sp__buf_len(&r->text);
        r->last = SP__LAST_VALUE;
    } else if (p->type == HTTP_REQUEST && !(r->value_open && at == r->feed)) {
        /* A value goes on after its line ended: obsolete line folding.
         * Refused (RFC 9112, 5.2), as nginx does: two parties could join
         * the lines differently. (A value split between two reads ends at
         * the end of one feed and goes on at the start of the next.) */
        return fail(r, 400);
    }
    r->value_open = at + n == r->feed_end;
    return text_add(r, at, n);
}

/* A chunk that would take the body over the limit is refused at its size
 * line, not after reading up to the limit. */
static int on_chunk_header(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    uint64_t have = sp__buf_len(&r->body);
    return p->content_length > r->opts->max_body - have ? fail(r, 413) : 0;
}

static sp_http_method_t method_of(unsigned m)
{
    switch (m) {
    case HTTP_GET: return SP_HTTP_GET;
    case HTTP_HEAD: return SP_HTTP_HEAD;
    case HTTP_POST: return SP_HTTP_POST;
    case HTTP_PUT: return SP_HTTP_PUT;
    case HTTP_DELETE: return SP_HTTP_DELETE;
    case HTTP_PATCH: return SP_HTTP_PATCH;
    case HTTP_OPTIONS: return SP_HTTP_OPTIONS;
    case HTTP_TRACE: return SP_HTTP_TRACE;
    case HTTP_CONNECT: return SP_HTTP_CONNECT;
    default: return SP_HTTP_OTHER;
    }
}

/* A value loses its trailing blanks (http-parser drops the leading ones). */
static void trim_value(char *v)
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
static int check_headers(sp_http_request_t *r)
{
    int cl = 0, te = 0, host = 0;
    char *base = sp__buf_data(&r->text);
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *name = base + sp__http_kv(r)[i].name;
        char *value = base + sp__http_kv(r)[i].value;
        trim_value(value);
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

/* The client's side: a response's headers. Returning 1 tells http-parser
 * there is no body: the answer to a HEAD, and 1xx, 204 and 304 answers,
 * which end at their blank line whatever length they announce (RFC 9112
 * 6.3; a 304 may carry the Content-Length of what it stands for). */
static int response_headers_complete(sp_http_request_t *r, http_parser *p)
{
    r->status = (int)p->status_code;
    if (p->http_major != 1)
        return fail(r, 505); /* not an HTTP/1 answer */
    bool bodiless = r->skip_body || r->status < 200 || r->status == 204 || r->status == 304;
    if (!bodiless && (p->flags & F_CONTENTLENGTH) && p->content_length > r->opts->max_body)
        return fail(r, 413);
    r->keep_alive = http_should_keep_alive(p);
    r->headers_done = true;
    return bodiless ? 1 : 0;
}

static int on_headers_complete(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    if (text_end(r) < 0) /* the last value, or the target */
        return -1;
    r->target_done = true;
    r->version = p->http_major == 1 && p->http_minor == 0 ? 10 : 11;
    if (p->type == HTTP_RESPONSE) {
        for (size_t i = 0; i < r->nheaders; i++)
            trim_value(sp__buf_data(&r->text) + sp__http_kv(r)[i].value);
        return response_headers_complete(r, p);
    }
    r->method = method_of(p->method);
    if (p->http_major != 1)
        return fail(r, 505); /* HTTP/0.9 or 2.0 in HTTP/1 syntax */
    int status = check_headers(r);
    if (!status)
        status = sp__http_req_decode_target(r);
    if (status)
        return fail(r, status);
    /* Refuse a body that is too long before reading it (and before any
     * "100 Continue"); a chunked one is counted as it comes. */
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > r->opts->max_body)
        return fail(r, 413);
    r->keep_alive = http_should_keep_alive(p);
    r->headers_done = true;
    return 0;
}

/* Check the framing bytes [from, to) (all but body data): every CR must be
 * followed by LF. http-parser, built without strict checks, takes any byte
 * after a CR as its LF, so "Host: x\r\n\rZ" or "5\rZ" would frame a message
 * differently from a server that checks (request smuggling). */
static int check_framing(sp_http_request_t *r, const char *from, const char *to)
{
    if (r->parser.flags & F_CHUNKED) {
        /* Chunked framing: every line ends with CRLF. http-parser reads a
         * bare LF in a chunk extension as extension text, where a proxy
         * ends the line ("5;a\nhello" frames the data differently). */
        for (; from < to; from++) {
            if ((r->cr_open && *from != '\n') || (!r->cr_open && *from == '\n'))
                return fail(r, 400);
            r->cr_open = *from == '\r';
        }
        return 0;
    }
    while (from < to) {
        if (r->cr_open) {
            if (*from++ != '\n')
                return fail(r, 400);
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

/* Bytes the feed must start with: the rest of a chunk's closing CRLF. */
static int check_crlf_due(sp_http_request_t *r, const char *p, const char *end)
{
    for (; r->crlf_due && p < end; p++, r->crlf_due--)
        if (*p != "\r\n"[2 - r->crlf_due])
            return fail(r, 400);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    if (check_framing(r, r->scan, at) < 0)
        return -1;
    r->scan = at + n;
    /* A chunk's data ends with exactly CRLF (non-strict http-parser takes
     * any two bytes: "helloAB0" would hide a request behind the chunk). */
    if ((p->flags & F_CHUNKED) && p->content_length == 0) {
        r->crlf_due = 2;
        if (check_crlf_due(r, at + n, r->feed_end) < 0)
            return -1;
    }
    if (sp__buf_len(&r->body) + n > r->opts->max_body)
        return fail(r, 413);
    return sp__buf_append(&r->body, at, n) < 0 ? fail(r, 500) : 0;
}

static int on_message_complete(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    r->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static void settings_init(void)
{
    http_parser_settings_init(&settings);
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_header_field = on_header_field;
    settings.on_header_value = on_header_value;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_chunk_header = on_chunk_header;
    settings.on_message_complete = on_message_complete;
}

void sp__http_msg_init(sp_http_request_t *r, const sp_http_server_opts_t *opts,
                       bool response)
{
    pthread_once(&settings_once, settings_init);
    memset(r, 0, sizeof *r);
    r->opts = opts;
    sp_buf_init(&r->text);
    sp_buf_init(&r->kvs);
    sp_buf_init(&r->body);
    http_parser_init(&r->parser, response ? HTTP_RESPONSE : HTTP_REQUEST);
    r->parser.data = r;
}

void sp__http_req_init(sp_http_request_t *r, const sp_http_server_opts_t *opts)
{
    sp__http_msg_init(r, opts, false);
}

void sp__http_req_reset(sp_http_request_t *r)
{
    sp_buf_clear(&r->text);
    sp_buf_clear(&r->kvs);
    sp_buf_clear(&r->body);
    r->nheaders = r->nparams = 0;
    r->target_len = r->header_bytes = 0;
    r->path = r->query = 0;
    r->last = SP__LAST_NONE;
    r->error = 0;
    r->begun = r->target_done = r->headers_done = r->complete = false;
    r->expect_continue = r->keep_alive = r->upgrade = false;
    r->status = 0;
    r->cr_open = false;
    r->crlf_due = 0;
}

void sp__http_req_free(sp_http_request_t *r)
{
    sp_buf_free(&r->text);
    sp_buf_free(&r->kvs);
    sp_buf_free(&r->body);
}

/* The status for a parser error that our callbacks did not choose. */
/* The status for a parser error that our callbacks did not choose, which
 * stopped it `at` in the fed bytes [p, end). A method http-parser does not
 * know, but well formed (a token, then a space), is 501 (RFC 9110, 9.1);
 * bytes that are no request line at all (a TLS hello) are 400. */
static int status_of(enum http_errno e, const char *p, const char *at, const char *end)
{
    if (e == HPE_HEADER_OVERFLOW)
        return 431;
    if (e != HPE_INVALID_METHOD)
        return 400;
    const char *start = at;
    while (start > p && sp__http_token_span(start - 1, 1))
        start--;
    size_t n = sp__http_token_span(start, (size_t)(end - start));
    return n && start + n < end && start[n] == ' ' ? 501 : 400;
}

size_t sp__http_req_feed(sp_http_request_t *r, const char *p, size_t n,
                         sp__http_state_t *state)
{
    r->feed = r->scan = p;
    r->feed_end = p ? p + n : p; /* NULL, 0: the end of the stream */
    if (check_crlf_due(r, p, p + n) < 0) {
        *state = SP__HTTP_FAILED;
        return 0;
    }
    size_t used = http_parser_execute(&r->parser, &settings, p, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e == HPE_PAUSED) {
        http_parser_pause(&r->parser, 0);
        e = HPE_OK;
    }
    /* The framing bytes after the last body data (fail() sets r->error). */
    bool bad_framing = e == HPE_OK && p && check_framing(r, r->scan, p + used) < 0;
    if (e != HPE_OK || bad_framing) {
        if (!r->error)
            r->error = status_of(e, p, p + used, p + n);
        *state = SP__HTTP_FAILED;
    } else if (r->complete) {
        /* After an upgrade request the rest is another protocol we do not
         * speak: answer this request, then close. */
        r->upgrade = r->parser.upgrade;
        *state = SP__HTTP_DONE;
    } else {
        *state = SP__HTTP_MORE;
    }
    return used;
}
