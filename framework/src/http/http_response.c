/* Responses: status, header lines and body, laid out into the connection's
 * output buffer.
 *
 * A buffered response is laid out when the handler returns, with its
 * Content-Length; a streamed one (sp_http_response_write) sends its headers
 * on the first write and its body as chunks. Small bodies are copied next
 * to the headers so one send carries both (and, when pipelined, several
 * responses); big ones go out from where they are, in the same sendmsg. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"

/* Bodies up to this size are copied into the output buffer; the buffer is
 * sent once it holds this much. */
enum { COPY_MAX = 16 * 1024, FLUSH_AT = 64 * 1024 };

/* How a response's body is delimited. */
typedef enum { BY_LENGTH, BY_CHUNKS, BY_CLOSE, NO_BODY } framing_t;

void sp__http_res_init(sp_http_response_t *res, sp__http_out_t *out,
                       const sp_http_server_t *srv)
{
    memset(res, 0, sizeof *res);
    res->out = out;
    res->server_line = srv->server_line;
    res->server_len = strlen(srv->server_line);
    res->server_id = srv->id;
    res->stopping = &srv->stopping;
    sp_buf_init(&res->head);
    sp_buf_init(&res->body);
    sp__http_res_reset(res);
}

void sp__http_res_reset(sp_http_response_t *res)
{
    sp__buf_clear(&res->head);
    sp__buf_clear(&res->body);
    res->status = 200;
    res->version = 11;
    res->head_only = res->close = res->started = res->chunked = false;
    res->has_length = res->failed = res->detached = false;
    res->length = res->sent = 0;
}

void sp__http_res_free(sp_http_response_t *res)
{
    sp_buf_free(&res->head);
    sp_buf_free(&res->body);
}

const char *sp_http_status_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

static bool has_no_body(int status)
{
    return status < 200 || status == 204 || status == 304;
}

/* ---- setting status and headers ------------------------------------------ */

int sp_http_response_set_status(sp_http_response_t *res, int status)
{
    if (res->started)
        return -EALREADY;
    if (status < 100 || status > 599)
        return -EINVAL;
    res->status = status;
    return 0;
}

int sp_http_response_status(const sp_http_response_t *res)
{
    return res->status;
}

bool sp_http_response_started(const sp_http_response_t *res)
{
    return res->started;
}

/* A header the server writes itself; n = strlen(name). */
static bool server_owned(const char *name, size_t n)
{
    switch (n) {
    case 4: return sp__http_named(name, "date");
    case 6: return sp__http_named(name, "server");
    case 10: return sp__http_named(name, "connection");
    case 17: return sp__http_named(name, "transfer-encoding");
    default: return false;
    }
}

/* Parse a Content-Length the handler sets. */
static int parse_length(const char *v, uint64_t *out)
{
    uint64_t n = 0;
    if (!*v)
        return -EINVAL;
    for (; *v; v++) {
        if (*v < '0' || *v > '9' || n > UINT64_MAX / 10 - 1)
            return -EINVAL;
        n = n * 10 + (uint64_t)(*v - '0');
    }
    *out = n;
    return 0;
}

/* Whether a header may be added (0 or the -errno), and the lengths of its
 * name (a token) and value (no CR or LF). Inline, its checks too: handlers
 * add a header or two to every response. */
static inline int header_valid(const char *name, const char *value, size_t *n, size_t *v)
{
    *n = strlen(name);
    *v = strlen(value);
    if (!*n || !sp__http_all_have(sp__http_byte_class, name, *n, SP__HTTP_TCHAR) ||
        !sp__http_all_have(sp__http_byte_class, value, *v, SP__HTTP_VALUE))
        return -EINVAL;
    return server_owned(name, *n) ? -EPERM : 0;
}

static inline int header_allowed(const sp_http_response_t *res, const char *name,
                                 const char *value, size_t *n, size_t *v)
{
    return res->started ? -EALREADY : header_valid(name, value, n, v);
}

/* "name: value\r\n" at dst (n + v + 4 bytes). */
static void format_line(char *dst, const char *name, size_t n, const char *value, size_t v)
{
    sp__copy(dst, name, n);
    memcpy(dst + n, ": ", 2);
    sp__copy(dst + n + 2, value, v);
    memcpy(dst + n + 2 + v, "\r\n", 2);
}

/* A Content-Length header's value (*length) when name is one: -EINVAL for
 * a bad value; 0 otherwise. */
static int length_of(const char *name, size_t n, const char *value, bool *is_length,
                     uint64_t *length)
{
    *is_length = n == 14 && sp__http_named(name, "content-length");
    return *is_length && parse_length(value, length) < 0 ? -EINVAL : 0;
}

/* Room at the end of the handler's header lines for one line of len
 * bytes, or NULL with *rc: -EINVAL for a second Content-Length, -ENOMEM. */
static char *line_room(sp_http_response_t *res, size_t len, bool is_length, int *rc)
{
    char *dst = is_length && res->has_length ? NULL : sp__buf_reserve(&res->head, len);
    *rc = dst ? 0 : is_length && res->has_length ? -EINVAL : -ENOMEM;
    return dst;
}

/* The line filled in at line_room() joins the headers; a Content-Length
 * one fixes the response's length. */
static void line_done(sp_http_response_t *res, size_t len, bool is_length, uint64_t length)
{
    sp__buf_commit(&res->head, len);
    if (is_length) {
        res->length = length;
        res->has_length = true;
    }
}

/* Append a header line that header_allowed() accepted (n, v: lengths). */
static int append_header(sp_http_response_t *res, const char *name,
                         const char *value, size_t n, size_t v)
{
    bool is_length;
    uint64_t length = 0;
    int rc;
    if (length_of(name, n, value, &is_length, &length) < 0)
        return -EINVAL;
    char *dst = line_room(res, n + v + 4, is_length, &rc);
    if (!dst)
        return rc;
    format_line(dst, name, n, value, v);
    line_done(res, n + v + 4, is_length, length);
    return 0;
}

struct sp_http_header {
    bool is_length;
    uint64_t length;
    size_t len;
    char line[]; /* "name: value\r\n" */
};

sp_http_header_t *sp_http_header_new(const char *name, const char *value)
{
    size_t n, v;
    bool is_length;
    uint64_t length = 0;
    int rc = !name || !value ? -EINVAL : header_valid(name, value, &n, &v);
    if (!rc)
        rc = length_of(name, n, value, &is_length, &length);
    sp_http_header_t *h = rc ? NULL : malloc(sizeof *h + n + v + 4);
    if (!h) {
        errno = rc ? -rc : ENOMEM;
        return NULL;
    }
    *h = (sp_http_header_t){is_length, length, n + v + 4};
    format_line(h->line, name, n, value, v);
    return h;
}

void sp_http_header_free(sp_http_header_t *h)
{
    free(h);
}

int sp_http_response_add_prepared(sp_http_response_t *res, const sp_http_header_t *h)
{
    if (!h)
        return -EINVAL;
    if (res->started)
        return -EALREADY;
    int rc = -ENOMEM; /* line_room's answer, or no memory */
    /* Most prepared lines are no Content-Length: no line_room() call. */
    char *dst = h->is_length ? line_room(res, h->len, true, &rc)
                             : sp__buf_reserve(&res->head, h->len);
    if (!dst)
        return rc;
    sp__copy(dst, h->line, h->len);
    line_done(res, h->len, h->is_length, h->length);
    return 0;
}

int sp_http_response_add_header(sp_http_response_t *res, const char *name,
                                const char *value)
{
    size_t n, v;
    int rc = header_allowed(res, name, value, &n, &v);
    return rc < 0 ? rc : append_header(res, name, value, n, v);
}

/* Remove every header line called name from the handler's headers. */
static void remove_header(sp_http_response_t *res, const char *name)
{
    size_t n = strlen(name);
    char *p = sp__buf_data(&res->head);
    size_t len = sp__buf_len(&res->head), keep = 0;
    for (size_t i = 0; i < len;) {
        const char *eol = memchr(p + i, '\n', len - i);
        size_t line = (size_t)(eol - (p + i)) + 1;
        bool match = line > n && p[i + n] == ':' && !strncasecmp(p + i, name, n);
        if (!match) {
            memmove(p + keep, p + i, line);
            keep += line;
        }
        i += line;
    }
    sp__buf_clear(&res->head);
    sp__buf_commit(&res->head, keep);
    if (sp__http_named(name, "content-length"))
        res->has_length = false;
}

int sp_http_response_set_header(sp_http_response_t *res, const char *name,
                                const char *value)
{
    size_t n, v;
    int rc = header_allowed(res, name, value, &n, &v);
    if (rc < 0)
        return rc;
    remove_header(res, name);
    return append_header(res, name, value, n, v);
}

int sp_http_response_set_body(sp_http_response_t *res, const void *p, size_t n)
{
    if (res->started)
        return -EALREADY;
    sp__buf_clear(&res->body);
    return n ? sp__buf_append(&res->body, p, n) : 0;
}

int sp_http_response_append(sp_http_response_t *res, const void *p, size_t n)
{
    if (res->started)
        return -EALREADY;
    return n ? sp__buf_append(&res->body, p, n) : 0;
}

int sp_http_response_error(sp_http_response_t *res, int status, const char *name,
                           const char *value)
{
    if (res->started)
        return -EALREADY;
    sp__buf_clear(&res->head);
    res->has_length = false;
    int rc = sp_http_response_set_status(res, status);
    if (rc == 0)
        rc = sp_http_response_add_header(res, "Content-Type", "text/plain; charset=utf-8");
    if (rc == 0 && name)
        rc = sp_http_response_add_header(res, name, value);
    char text[64];
    int n = snprintf(text, sizeof text, "%d %s\n", status, sp_http_status_reason(status));
    if (rc == 0 && !has_no_body(status))
        rc = sp_http_response_set_body(res, text, (size_t)n);
    return rc;
}

/* ---- laying out ----------------------------------------------------------- */

/* v in decimal at p; its end. Digits are written from the last, two at a
 * time (a division each pair): every answer carries a length. */
static char *put_u64(char *p, uint64_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";
    size_t digits = 1;
    for (uint64_t t = 10; digits < 20 && v >= t; t *= 10)
        digits++;
    char *end = p + digits;
    for (p = end; v >= 100; v /= 100) {
        p -= 2;
        memcpy(p, pairs + 2 * (v % 100), 2);
    }
    if (v >= 10)
        memcpy(p - 2, pairs + 2 * v, 2);
    else
        p[-1] = (char)('0' + v);
    return end;
}

static char *put(char *p, const char *s, size_t n)
{
    sp__copy(p, s, n); /* s may be an empty buffer's NULL when n is 0 */
    return p + n;
}

#define PUT_LIT(p, lit) put(p, lit, sizeof lit - 1)

static char *put_status_line(char *p, int status)
{
    p = PUT_LIT(p, "HTTP/1.1 ");
    p = put_u64(p, (uint64_t)status);
    *p++ = ' ';
    const char *reason = sp_http_status_reason(status);
    p = put(p, reason, strlen(reason));
    return PUT_LIT(p, "\r\n");
}

/* Status line, the server's headers, the handler's, framing, blank line:
 * into the output buffer, followed by the `copy` bytes at body (a small
 * buffered body, laid out with its head). */
static int put_head(sp_http_response_t *res, framing_t how, uint64_t len, const char *body,
                    size_t copy)
{
    size_t server = res->server_len, user = sp__buf_len(&res->head);
    char *p = sp__buf_reserve(&res->out->buf, 200 + server + user + copy);
    if (!p)
        return -ENOMEM;
    char *start = p;
    if (res->status == 200) {
        size_t n;
        const char *ok = sp__http_ok_head(res->server_line, server, res->server_id, &n);
        p = put(p, ok, n);
    } else {
        p = put_status_line(p, res->status);
        p = put(p, res->server_line, server);
        p = put(p, sp__http_date_line(), SP__HTTP_DATE_LINE_LEN);
    }
    p = put(p, sp__buf_data(&res->head), user);
    if (how == BY_LENGTH && !res->has_length) {
        p = PUT_LIT(p, "Content-Length: ");
        p = PUT_LIT(put_u64(p, len), "\r\n");
    } else if (how == BY_CHUNKS) {
        p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    }
    if (how == BY_CLOSE || atomic_load(res->stopping))
        res->close = true;
    if (res->close)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (res->version == 10)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    p = put(p, body, copy);
    sp__buf_commit(&res->out->buf, (size_t)(p - start));
    return 0;
}

/* Body bytes to the socket, after the headers: as a chunk when chunked,
 * copied when small, sent in place when big. */
static int emit(sp_http_response_t *res, const void *p, size_t n)
{
    if (!n || res->head_only || has_no_body(res->status))
        return 0;
    if (res->has_length && res->sent + n > res->length)
        return -EMSGSIZE;
    res->sent += n;
    char size[24];
    size_t slen = res->chunked ? (size_t)snprintf(size, sizeof size, "%zx\r\n", n) : 0;
    if (n > COPY_MAX) {
        struct iovec v[3] = {{size, slen}, {(void *)p, n}, {"\r\n", res->chunked ? 2u : 0u}};
        return sp__http_out_flush(res->out, v, 3);
    }
    sp_buf_t *out = &res->out->buf;
    if ((slen && sp__buf_append(out, size, slen) < 0) || sp__buf_append(out, p, n) < 0 ||
        (res->chunked && sp__buf_append(out, "\r\n", 2) < 0))
        return -ENOMEM;
    return sp__buf_len(out) >= FLUSH_AT ? sp__http_out_flush(res->out, NULL, 0) : 0;
}

static int start_stream(sp_http_response_t *res)
{
    framing_t how = has_no_body(res->status) ? NO_BODY
                    : res->has_length        ? BY_LENGTH
                    : res->version == 11     ? BY_CHUNKS
                                             : BY_CLOSE;
    int rc = put_head(res, how, 0, NULL, 0);
    if (rc < 0)
        return rc;
    res->started = true;
    res->chunked = how == BY_CHUNKS;
    rc = emit(res, sp__buf_data(&res->body), sp__buf_len(&res->body));
    sp__buf_clear(&res->body);
    return rc;
}

static int stream_failed(sp_http_response_t *res, int rc)
{
    if (rc < 0)
        res->failed = true;
    return rc;
}

ssize_t sp_http_response_write(sp_http_response_t *res, const void *p, size_t n)
{
    if (res->failed)
        return -EPIPE;
    int rc = res->started ? 0 : start_stream(res);
    if (rc == 0)
        rc = emit(res, p, n);
    return rc < 0 ? stream_failed(res, rc) : (ssize_t)n;
}

int sp_http_response_flush(sp_http_response_t *res)
{
    if (res->failed)
        return -EPIPE;
    int rc = res->started ? 0 : start_stream(res);
    if (rc == 0)
        rc = sp__http_out_flush(res->out, NULL, 0);
    return stream_failed(res, rc);
}

int sp_http_response_sendfile(sp_http_response_t *res, int file_fd, off_t offset,
                              size_t len)
{
    if (res->started)
        return -EALREADY;
    if (sp__buf_len(&res->body) || (res->has_length && res->length != len))
        return -EINVAL;
    framing_t how = has_no_body(res->status) ? NO_BODY : BY_LENGTH;
    int rc = put_head(res, how, len, NULL, 0);
    if (rc < 0)
        return rc;
    res->started = true;
    res->has_length = true;
    res->length = len;
    if (res->head_only || how == NO_BODY)
        return 0;
    rc = sp__http_out_sendfile(res->out, file_fd, offset, len, &res->sent);
    return stream_failed(res, rc);
}

/* A buffered response, all at once. A Content-Length set by the handler
 * that does not match the body is a handler bug: 500. */
static bool finish_buffered(sp_http_response_t *res)
{
    size_t n = sp__buf_len(&res->body);
    if (res->has_length && !res->head_only && res->length != n &&
        !has_no_body(res->status))
        sp_http_response_error(res, 500, NULL, NULL);
    framing_t how = has_no_body(res->status) ? NO_BODY : BY_LENGTH;
    /* A small body goes out with the head (what emit() would do). */
    bool with_head = n <= COPY_MAX && how == BY_LENGTH && !res->head_only;
    const char *body = sp__buf_data(&res->body);
    if (put_head(res, how, n, body, with_head ? n : 0) < 0)
        return false;
    res->started = true;
    if (with_head)
        res->sent = n;
    else if (emit(res, body, n) < 0)
        return false;
    return sp__buf_len(&res->out->buf) < FLUSH_AT ||
           sp__http_out_flush(res->out, NULL, 0) == 0;
}

bool sp__http_res_finish(sp_http_response_t *res)
{
    if (res->detached)
        return false;
    if (!res->started)
        return finish_buffered(res);
    if (res->failed)
        return false;
    bool body = !res->head_only && !has_no_body(res->status);
    if (body && res->chunked)
        return sp__buf_append(&res->out->buf, "0\r\n\r\n", 5) == 0;
    /* A fixed length the handler did not fill: the client would wait for
     * the rest; closing tells it the body is cut short. */
    return !(body && res->has_length && res->sent != res->length);
}
