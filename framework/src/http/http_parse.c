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

static int text_add(sp_http_request_t *r, const char *p, size_t n)
{
    return sp__buf_append(&r->text, p, n) < 0 ? sp__http_fail(r, 500) : 0;
}

/* End the token being collected with a NUL. */
static int text_end(sp_http_request_t *r)
{
    return text_add(r, "", 1);
}

/* End the token being collected with a NUL, and start the next with n
 * bytes at p (one reserve for both). The next token's offset, or -1. */
static inline ssize_t text_next(sp_http_request_t *r, const char *p, size_t n)
{
    char *dst = sp__buf_reserve(&r->text, n + 1);
    if (!dst)
        return sp__http_fail(r, 500);
    dst[0] = '\0';
    sp__copy(dst + 1, p, n);
    sp__buf_commit(&r->text, n + 1);
    return (ssize_t)(sp__buf_len(&r->text) - n);
}

static int on_message_begin(http_parser *p)
{
    req_of(p)->begun = true;
    return 0;
}

/* The limits on the request line and the headers, shared by the callbacks
 * that collect a request and those that only count (limit_before_error). */
static int count_target_bytes(sp_http_request_t *r, size_t n)
{
    r->target_len += n;
    return r->target_len > r->opts->max_request_line ? sp__http_fail(r, 414) : 0;
}

/* Header bytes count against max_header_size, trailers of a chunked body
 * too (they are not kept). */
static int count_header_bytes(sp_http_request_t *r, size_t n)
{
    r->header_bytes += n;
    return r->header_bytes > r->opts->max_header_size ? sp__http_fail(r, 431) : 0;
}

static int count_header(sp_http_request_t *r)
{
    if (r->nheaders >= (size_t)r->opts->max_headers)
        return sp__http_fail(r, 431);
    r->nheaders++;
    return count_header_bytes(r, 4); /* ": " and CRLF, as on the wire */
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    r->head_end = at + n;
    if (count_target_bytes(r, n) < 0)
        return -1;
    return text_add(r, at, n);
}

/* A header's name starts with the n bytes at `at`; the target or the
 * previous value ends. */
static int new_header(sp_http_request_t *r, const char *at, size_t n)
{
    if (count_header(r) < 0)
        return -1;
    ssize_t name = text_next(r, at, n);
    if (name < 0)
        return -1;
    r->target_done = true;
    r->last = SP__LAST_FIELD;
    return sp__http_kv_push(r, (size_t)name, 0) < 0 ? sp__http_fail(r, 500) : 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    r->head_end = at + n;
    if (count_header_bytes(r, n) < 0)
        return -1;
    if (r->headers_done)
        return 0; /* a trailer */
    if (r->last != SP__LAST_FIELD)
        return new_header(r, at, n);
    return text_add(r, at, n);
}

/* (Obsolete line folding in a request is refused by check_framing.) */
static int on_header_value(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    r->head_end = at + n;
    if (count_header_bytes(r, n) < 0)
        return -1;
    if (r->headers_done)
        return 0;
    if (r->last != SP__LAST_VALUE) {
        ssize_t value = text_next(r, at, n); /* the name ends */
        if (value < 0)
            return -1;
        sp__http_kv(r)[r->nheaders - 1].value = (size_t)value;
        r->last = SP__LAST_VALUE;
        return 0;
    }
    return text_add(r, at, n);
}

/* A chunk that would take the body over the limit is refused at its size
 * line, not after reading up to the limit. */
static int on_chunk_header(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    return p->content_length > r->opts->max_body - r->body_total ? sp__http_fail(r, 413) : 0;
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

/* A response without a body: the answer to a HEAD, and 1xx, 204 and 304
 * answers, which end at their blank line whatever length they announce
 * (RFC 9112 6.3; a 304 may carry the Content-Length of what it stands
 * for). */
static bool bodiless(const sp_http_request_t *r, const http_parser *p)
{
    unsigned s = p->status_code;
    return r->skip_body || s < 200 || s == 204 || s == 304;
}

/* The client's side: a response's headers. Returning 1 tells http-parser
 * there is no body. */
static int response_headers_complete(sp_http_request_t *r, http_parser *p)
{
    r->status = (int)p->status_code;
    if (p->http_major != 1)
        return sp__http_fail(r, 505); /* not an HTTP/1 answer */
    bool none = bodiless(r, p);
    if (!none && (p->flags & F_CONTENTLENGTH) && p->content_length > r->opts->max_body)
        return sp__http_fail(r, 413);
    r->keep_alive = http_should_keep_alive(p);
    r->headers_done = true;
    return none ? 1 : 0;
}

static int on_headers_complete(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    if (text_end(r) < 0) /* the last value, or the target */
        return -1;
    r->target_done = true;
    r->version = p->http_major == 1 && p->http_minor == 0 ? 10 : 11;
    if (p->type == HTTP_RESPONSE) {
        if (sp__http_check_response_head(r) < 0)
            return -1;
        for (size_t i = 0; i < r->nheaders; i++)
            sp__http_trim_value(sp__buf_data(&r->text) + sp__http_kv(r)[i].value);
        return response_headers_complete(r, p);
    }
    r->method = method_of(p->method);
    if (p->http_major != 1)
        return sp__http_fail(r, 505); /* HTTP/0.9 or 2.0 in HTTP/1 syntax */
    int status = sp__http_check_headers(r);
    if (!status)
        status = sp__http_req_decode_target(r);
    if (status)
        return sp__http_fail(r, status);
    /* Refuse a body that is too long before reading it (and before any
     * "100 Continue"); a chunked one is counted as it comes. */
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > r->opts->max_body)
        return sp__http_fail(r, 413);
    r->keep_alive = http_should_keep_alive(p);
    r->headers_done = true;
    return 0;
}

/* Body bytes held by all connections together stay under
 * max_buffered_bodies: beyond it the server is busy (503), whatever one
 * request's own limit allows. */
static int charge_body(sp_http_request_t *r, size_t n)
{
    if (!r->body_pool)
        return 0;
    if (atomic_fetch_add(r->body_pool, n) + n > r->opts->max_buffered_bodies) {
        atomic_fetch_sub(r->body_pool, n);
        return sp__http_fail(r, 503);
    }
    r->body_charged += n;
    return 0;
}

void sp__http_body_release(sp_http_request_t *r)
{
    if (r->body_charged)
        atomic_fetch_sub(r->body_pool, r->body_charged);
    r->body_charged = 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    sp_http_request_t *r = req_of(p);
    if (sp__http_check_framing(r, r->scan, at) < 0)
        return -1;
    r->scan = at + n;
    /* A chunk's data ends with exactly CRLF (non-strict http-parser takes
     * any two bytes: "helloAB0" would hide a request behind the chunk). */
    if ((p->flags & F_CHUNKED) && p->content_length == 0) {
        r->crlf_due = 2;
        if (sp__http_check_crlf_due(r, at + n, r->feed_end) < 0)
            return -1;
    }
    r->body_total += n;
    if (r->body_total > r->opts->max_body)
        return sp__http_fail(r, 413);
    if (charge_body(r, n) < 0)
        return -1;
    return sp__buf_append(&r->body, at, n) < 0 ? sp__http_fail(r, 500) : 0;
}

static int on_message_complete(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    r->complete = true;
    /* What http_parser_pause(p, 1) does, without the call (and the one to
     * unpause after the feed): the field is the parser's public state. */
    p->http_errno = HPE_PAUSED;
    return 0;
}

/* Callbacks that only count what the collecting ones would, for
 * limit_before_error. */
static int count_url(http_parser *p, const char *at, size_t n)
{
    (void)at;
    return count_target_bytes(req_of(p), n);
}

static int count_field(http_parser *p, const char *at, size_t n)
{
    (void)at;
    sp_http_request_t *r = req_of(p);
    if (count_header_bytes(r, n) < 0)
        return -1;
    if (r->headers_done || r->last == SP__LAST_FIELD)
        return 0;
    r->last = SP__LAST_FIELD;
    return count_header(r);
}

static int count_value(http_parser *p, const char *at, size_t n)
{
    (void)at;
    sp_http_request_t *r = req_of(p);
    if (!r->headers_done)
        r->last = SP__LAST_VALUE;
    return count_header_bytes(r, n);
}

/* The replayed head ends: the lines after it (a chunked body's trailers)
 * count as trailers did, and the body is read or skipped as it was. */
static int count_headers_done(http_parser *p)
{
    sp_http_request_t *r = req_of(p);
    r->headers_done = true;
    return p->type == HTTP_RESPONSE && bodiless(r, p) ? 1 : 0;
}

static http_parser_settings counting;

/* What the parser and the limits stood at before a feed. */
typedef struct {
    http_parser parser;
    size_t target_len, header_bytes, nheaders;
    int last;
    bool headers_done;
} before_feed_t;

/* http-parser hands a token to its callback when the token ends or the
 * bytes do, so a byte it refuses inside a token hides the token's piece
 * before it: had a read ended just before that byte, the piece would have
 * been counted and could have crossed a limit (414, 431) first. Replaying
 * the bytes up to the refused one from the state before the feed, only
 * counting, gives the status such a read would have: the same answer
 * however reads split the bytes. 0 if no limit is crossed. */
static int limit_before_error(sp_http_request_t *r, const before_feed_t *b,
                              const char *p, size_t used)
{
    http_parser replay = b->parser;
    r->target_len = b->target_len;
    r->header_bytes = b->header_bytes;
    r->nheaders = b->nheaders;
    r->last = b->last;
    r->headers_done = b->headers_done;
    r->error = 0;
    http_parser_execute(&replay, &counting, p, used);
    return r->error;
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
    http_parser_settings_init(&counting);
    counting.on_url = count_url;
    counting.on_header_field = count_field;
    counting.on_header_value = count_value;
    counting.on_headers_complete = count_headers_done;
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
    sp__buf_clear(&r->text);
    sp__buf_clear(&r->kvs);
    sp__buf_clear(&r->body);
    sp__http_body_release(r);
    r->body_total = r->body_off = 0;
    r->nheaders = r->nparams = 0;
    r->target_len = r->header_bytes = 0;
    r->path = r->query = 0;
    r->last = SP__LAST_NONE;
    r->error = 0;
    r->begun = r->target_done = r->headers_done = r->complete = false;
    r->expect_continue = r->keep_alive = r->upgrade = false;
    r->status = 0;
    r->cr_open = r->lf_open = false;
    r->crlf_due = 0;
    r->method_pending = false;
}

void sp__http_req_free(sp_http_request_t *r)
{
    sp_buf_free(&r->text);
    sp_buf_free(&r->kvs);
    sp_buf_free(&r->body);
    sp__http_body_release(r);
}

/* Where the parser stopped, as a read's end would be: a callback that
 * refused a piece of a token refused it at the piece's end (http-parser
 * stops past the byte after it). */
static const char *stop_point(const sp_http_request_t *r, enum http_errno e, const char *end)
{
    switch (e) {
    case HPE_CB_url:
    case HPE_CB_header_field:
    case HPE_CB_header_value:
        return r->head_end;
    case HPE_CB_body:
        return r->scan;
    default:
        return end;
    }
}

/* A method http-parser does not know, from the byte it stopped at: well
 * formed (a token, then a space) it is 501 (RFC 9110, 9.1); bytes that are
 * no request line at all (a TLS hello) are 400. The bytes before are the
 * token's (http-parser stops at the first that matches no method it knows,
 * and r->begun says it had taken some), so the verdict waits for the byte
 * after the token, in this feed or a later one, and is the same however
 * reads split the line. Nothing is used until then. */
enum { METHOD_TAIL_MAX = 64 };
static size_t method_verdict(sp_http_request_t *r, const char *at, size_t n,
                             sp__http_state_t *state)
{
    size_t span = sp__http_token_span(at, n < METHOD_TAIL_MAX ? n : METHOD_TAIL_MAX);
    if (span == n && n < METHOD_TAIL_MAX) {
        r->method_pending = true;
        *state = SP__HTTP_MORE;
        return 0;
    }
    bool token = span < METHOD_TAIL_MAX && at[span] == ' ' && (span || r->begun);
    r->error = token ? 501 : 400;
    *state = SP__HTTP_FAILED;
    return 0;
}

size_t sp__http_req_feed(sp_http_request_t *r, const char *p, size_t n,
                         sp__http_state_t *state)
{
    /* A request's first bytes: the common head, if that is what they are,
     * without http-parser (http_fast_head.c). */
    if (p && !r->begun && !r->method_pending && r->parser.type == HTTP_REQUEST &&
        !sp__buf_len(&r->text)) {
        size_t used = sp__http_fast_head(r, p, n, state);
        if (used)
            return used;
    }
    return sp__http_req_parse(r, p, n, state);
}

size_t sp__http_req_parse(sp_http_request_t *r, const char *p, size_t n,
                          sp__http_state_t *state)
{
    if (r->method_pending)
        return method_verdict(r, p, n, state);
    r->scan = p;
    r->feed_end = p ? p + n : p; /* NULL, 0: the end of the stream */
    r->head_end = NULL;
    if (r->crlf_due && sp__http_check_crlf_due(r, p, p + n) < 0) {
        *state = SP__HTTP_FAILED;
        return 0;
    }
    before_feed_t before = {r->parser, r->target_len, r->header_bytes, r->nheaders, r->last,
                            r->headers_done};
    size_t used = http_parser_execute(&r->parser, &settings, p, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e == HPE_PAUSED) {
        r->parser.http_errno = HPE_OK;
        e = HPE_OK;
    }
    /* The framing bytes after the last body data, up to where the parser
     * stopped: an error among them comes before whatever stopped it, as it
     * would if a read had ended just after it (sp__http_fail() sets r->error). */
    if (p && sp__http_check_framing(r, r->scan, stop_point(r, e, p + used)) < 0) {
        *state = SP__HTTP_FAILED;
        return used;
    }
    if (e == HPE_INVALID_METHOD && p)
        return used + method_verdict(r, p + used, n - used, state);
    if (e != HPE_OK) {
        if (!r->error && !limit_before_error(r, &before, p, used))
            r->error = e == HPE_HEADER_OVERFLOW ? 431 : 400;
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
