/* Internals of the HTTP server shared by the http_*.c files: the request
 * (parser glue), the response, output to the socket and the server. */
#ifndef SP_HTTP_INTERNAL_H
#define SP_HTTP_INTERNAL_H

#include <http_parser.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <time.h>

#include "base/clock.h"
#include "base/list.h"
#include "http_scratch.h"
#include "metrics/slots.h"
#include "net/buffer_inline.h"
#include "spindle/buffer.h"
#include "spindle/http.h"
#include "spindle/log.h"
#include "spindle/tls.h"

/* ---- requests: http_parse.c, http_request.c ------------------------------ */

/* Offsets into the request's text: strings move when the text grows. */
typedef struct sp__http_kv {
    size_t name, value;
} sp__http_kv_t;

/* Where the parser is in the header lines. */
enum { SP__LAST_NONE, SP__LAST_FIELD, SP__LAST_VALUE };

struct sp_http_request {
    http_parser parser;
    const sp_http_server_opts_t *opts; /* limits, defaults filled in */
    /* Target, header names and values, decoded path, raw query and the
     * decoded parameters, each NUL-terminated, one after the other. */
    sp_buf_t text;
    sp_buf_t kvs; /* sp__http_kv_t: headers [0, nheaders), then parameters */
    size_t nheaders, nparams;
    size_t target_len, header_bytes;
    size_t path, query; /* offsets in text */
    int last;           /* SP__LAST_*: which token the parser is in */
    /* The end of the current feed's bytes, and of the last header piece
     * seen in them (NULL: none yet). */
    const char *feed_end, *head_end;
    /* Line-ending checks http-parser skips when built without strict mode
     * (Debian's): the next framing byte to check, a CR or a line end just
     * seen, and how many bytes of a chunk's closing CRLF the next feed must
     * start with. */
    const char *scan;
    bool cr_open, lf_open;
    unsigned char crlf_due;
    /* An unknown method: its verdict waits for the byte after its token. */
    bool method_pending;
    sp_buf_t body;      /* decoded body bytes held (a streamed body: the
                           part not yet read by the handler) */
    size_t body_total;  /* decoded body bytes parsed, against max_body */
    size_t body_off;    /* bytes of `body` sp_http_body_read has returned */
    /* Body bytes held in memory are charged to the server's pool of
     * max_buffered_bodies (NULL: no pool, as for the client's answers). */
    _Atomic size_t *body_pool;
    size_t body_charged;
    bool streaming;     /* the handler runs after the headers and reads
                           the body itself (http_conn.c) */
    int error;          /* status for the error that stopped the parser */
    bool begun;         /* the first byte of the request was parsed */
    bool target_done;   /* the method and target are known (NUL-terminated) */
    bool headers_done, complete, expect_continue, keep_alive, upgrade;
    sp_http_method_t method;
    int version;
    const sp_addr_t *peer;
    /* Responses (the client parses them with the same code): */
    int status;
    bool skip_body; /* set before parsing the answer to a HEAD */
};

typedef enum { SP__HTTP_MORE, SP__HTTP_DONE, SP__HTTP_FAILED } sp__http_state_t;

void sp__http_req_init(sp_http_request_t *r, const sp_http_server_opts_t *opts);
/* The same for either kind of message: the client parses responses into an
 * sp_http_request_t too (headers, body, keep_alive, status). */
void sp__http_msg_init(sp_http_request_t *r, const sp_http_server_opts_t *opts,
                       bool response);
/* Forget the last request, keep the memory, parse the next one. */
void sp__http_req_reset(sp_http_request_t *r);
void sp__http_req_free(sp_http_request_t *r);
/* Parse bytes of the connection's input: returns how many belong to the
 * current request; *state says whether it is complete (the rest is the
 * next request's), needs more bytes, or failed with r->error. */
size_t sp__http_req_feed(sp_http_request_t *r, const char *p, size_t n,
                         sp__http_state_t *state);
/* The same through http-parser alone; and the common head alone
 * (http_fast_head.c: 0 when it declines, the request left as it was).
 * sp__http_req_feed tries the second, at a request's start, then the first. */
size_t sp__http_req_parse(sp_http_request_t *r, const char *p, size_t n,
                          sp__http_state_t *state);
size_t sp__http_fast_head(sp_http_request_t *r, const char *p, size_t n,
                          sp__http_state_t *state);
/* Give the memory charge of the body bytes held back to the pool (after
 * they were cleared, or with the request). */
void sp__http_body_release(sp_http_request_t *r);
static inline const char *sp__http_req_str(const sp_http_request_t *r, size_t off)
{
    return sp__buf_data(&r->text) + off;
}
/* Whether a header name is `lower` (given in lower case): the first byte
 * decides most comparisons without a call. */
static inline bool sp__http_named(const char *name, const char *lower)
{
    return (name[0] | 0x20) == lower[0] && !strcasecmp(name, lower);
}
/* Four bytes of s ORed with 0x20 each, as a word (any byte order: the
 * words compared are loaded the same way). */
static inline uint32_t sp__http_low4(const char *s)
{
    uint32_t w;
    memcpy(&w, s, 4);
    return w | 0x20202020u;
}
/* The same for a token of n bytes and a lower-case name of ln letters and
 * '-': in a token, only the same letter in either case, or '-' itself,
 * ORed with 0x20 gives such a byte. Four bytes a step, the last step
 * ending at the last byte (a name has four or more). */
static inline bool sp__http_named_n(const char *name, size_t n, const char *lower,
                                    size_t ln)
{
    if (n != ln)
        return false;
    if (n < 4) {
        for (size_t i = 0; i < n; i++)
            if ((name[i] | 0x20) != lower[i])
                return false;
        return true;
    }
    for (size_t i = 0; i + 4 < n; i += 4)
        if (sp__http_low4(name + i) != sp__http_low4(lower + i))
            return false;
    return sp__http_low4(name + n - 4) == sp__http_low4(lower + n - 4);
}

/* sp_http_request_keep_alive(), inline for the connection's own use. */
static inline bool sp__http_keeps_alive(const sp_http_request_t *r)
{
    return r->keep_alive && !r->upgrade;
}

/* Stop the parser with this status: returning non-zero from a callback
 * makes http_parser_execute fail with HPE_CB_*. */
static inline int sp__http_fail(sp_http_request_t *r, int status)
{
    r->error = status;
    return -1;
}

/* ---- checks http-parser leaves out: http_framing.c ----------------------- */

/* Eight bytes at a time, for the scans of a request head (http_framing.c,
 * http_fast_head.c). */
/* Eight bytes at p, the first in the lowest bits whatever the byte order
 * (compilers make this one load where the machine is little-endian). */
static inline uint64_t sp__http_load_le64(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint64_t)u[0] | (uint64_t)u[1] << 8 | (uint64_t)u[2] << 16 |
           (uint64_t)u[3] << 24 | (uint64_t)u[4] << 32 | (uint64_t)u[5] << 40 |
           (uint64_t)u[6] << 48 | (uint64_t)u[7] << 56;
}

/* The index of the lowest byte whose high bit is set in m (m != 0, only
 * high bits set): its bit moved to the byte's lowest bit, 1 << 8k, times
 * bytes 7..0 puts k in the top byte. */
static inline unsigned sp__http_first_marked(uint64_t m)
{
    uint64_t lowest = m & (~m + 1);
    return (unsigned)(((lowest >> 7) * 0x0001020304050607ull) >> 56);
}

/* The framing bytes [from, to) of the current feed (all but body data):
 * line ends, folding. 0 or -1 (r->error: 400). */
int sp__http_check_framing(sp_http_request_t *r, const char *from, const char *to);
/* A response's header block, by the lenient rule, before its chunked
 * framing is checked by the strict one. 0 or -1. */
int sp__http_check_response_head(sp_http_request_t *r);
/* The bytes a feed must start with: the rest of a chunk's closing CRLF.
 * 0 or -1. */
int sp__http_check_crlf_due(sp_http_request_t *r, const char *p, const char *end);
/* The header lines of a request: trimmed, Expect noted, and the length
 * defences. 0 or the status (400). */
int sp__http_check_headers(sp_http_request_t *r);
/* A value loses its trailing blanks (http-parser drops the leading ones). */
void sp__http_trim_value(char *v);

/* Whether every byte c of s[0, n) has `bit` in table[c]: four bytes a
 * step, their lookups ANDed, so one branch covers four (headers and
 * targets are checked byte by byte on every request); the last step ends
 * at s[n - 1], overlapping the one before, so no byte is left over. */
static inline bool sp__http_all_have(const unsigned char *table, const char *s, size_t n,
                                     unsigned char bit)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n < 4) {
        unsigned char all = bit;
        for (size_t i = 0; i < n; i++)
            all &= table[u[i]];
        return all;
    }
    const unsigned char *last = u + n - 4;
    for (; u < last; u += 4)
        if (!(table[u[0]] & table[u[1]] & table[u[2]] & table[u[3]] & bit))
            return false;
    return table[last[0]] & table[last[1]] & table[last[2]] & table[last[3]] & bit;
}
/* Byte classes (http_request.c): TCHAR, the RFC 7230 tchar, visible ASCII
 * but the separators "(),/:;<=>?@[\]{}; PLAIN, a byte an origin-form
 * target may hold and still be its own path (not a control, escape, query
 * or fragment); HOST, of a Host value; VALUE, of a response's header value
 * (not NUL, CR or LF). */
enum { SP__HTTP_TCHAR = 1, SP__HTTP_PLAIN = 2, SP__HTTP_HOST = 4, SP__HTTP_VALUE = 8 };
extern const unsigned char sp__http_byte_class[256];

/* sp__http_req_decode_target() for any target but a plain path. */
int sp__http_req_decode_other_target(sp_http_request_t *r);
/* Decode target, path and query parameters after the headers; 0 or 400.
 * The usual target, "/path" with nothing to decode and no query, is its
 * own path, and the NUL that ends it an empty query: nothing to copy. */
static inline int sp__http_req_decode_target(sp_http_request_t *r)
{
    const char *t = sp__http_req_str(r, 0);
    size_t tl = r->target_len;
    if (!tl || t[0] != '/' ||
        !sp__http_all_have(sp__http_byte_class, t + 1, tl - 1, SP__HTTP_PLAIN))
        return sp__http_req_decode_other_target(r);
    r->path = 0;
    r->query = tl;
    return 0;
}

/* An RFC 7230 token (header names): http-parser 2.9.4 lets a space in. */
bool sp__http_is_token(const char *s);
/* How many of the first max bytes of s are token characters. */
size_t sp__http_token_span(const char *s, size_t max);
/* Does t[0, n) hold a space or control byte? None belongs in a request
 * target or URL (http-parser lets a tab, a form feed and DEL through). */
bool sp__http_has_control(const char *t, size_t n);
/* A header value without control bytes (a tab is fine). */
bool sp__http_field_value_ok(const char *v);
/* Append a header or parameter (offsets); 0 or -ENOMEM. The caller counts
 * it in nheaders or nparams. */
static inline int sp__http_kv_push(sp_http_request_t *r, size_t name, size_t value)
{
    sp__http_kv_t kv = {name, value};
    return sp__buf_append(&r->kvs, &kv, sizeof kv);
}
static inline sp__http_kv_t *sp__http_kv(const sp_http_request_t *r)
{
    return (sp__http_kv_t *)(void *)sp__buf_data(&r->kvs);
}

/* ---- output: http_io.c --------------------------------------------------- */

/* A connection's output: bytes gathered in buf go out together. */
typedef struct sp__http_out {
    int fd;
    sp_tls_conn_t *tls; /* NULL: plain TCP */
    sp_buf_t buf;
    int64_t timeout_us; /* per wait for the socket to take bytes; < 0 none */
    bool borrowed;      /* buf is the thread's scratch (http_scratch.c) */
    uint64_t until_ns;  /* no wait goes past it (sp_now_ns clock); 0 none */
    uint64_t written;   /* bytes sent, all told */
    unsigned waits;     /* waits for the socket to take bytes, all told */
} sp__http_out_t;

/* Send buf, then the n extra iovecs (not copied). 0 or -errno. */
int sp__http_out_flush(sp__http_out_t *o, const struct iovec *extra, int n);
/* Flush, then len bytes of file_fd from off with sendfile; *sent counts
 * the file bytes that went out. 0 or -errno. */
int sp__http_out_sendfile(sp__http_out_t *o, int file_fd, off_t off, size_t len,
                          size_t *sent);
/* The deadline us from now on the sp_now_ns clock; 0 (none) for us < 0. */
uint64_t sp__http_deadline(int64_t us);
/* Microseconds left until deadline_ns (sp_now_ns clock), rounded up; -1
 * for none. */
int64_t sp__http_left_us(uint64_t deadline_ns);
/* A wait of us (< 0: none) cut short at until_ns (0: none): microseconds,
 * -1 for none, 0 once until_ns has passed. */
int64_t sp__http_cut_us(int64_t us, uint64_t until_ns);
/* Read up to `size` more bytes into `in`, over TLS when tls is set,
 * waiting until deadline_ns (0: none). A plain read that came back short
 * means the socket was emptied: the next call waits for readiness first
 * instead of paying for an EAGAIN (*drained carries that between calls).
 * With `borrowed` (a server connection's input) the bytes go into the
 * thread's input scratch while `in` holds nothing (*borrowed tracks it;
 * NULL: never, as for the clients). Bytes read, 0 at EOF, -errno,
 * -ETIMEDOUT. */
ssize_t sp__http_read_lent(int fd, sp_tls_conn_t *tls, sp_buf_t *in, bool *borrowed,
                           size_t size, uint64_t deadline, bool *drained);

/* ---- read deadlines of server connections: http_deadline.c -------------- */

/* A connection's read deadline, enforced by one lazily re-armed timer. */
typedef struct sp__http_deadline sp__http_deadline_t;
/* For fd, on an IOManager fiber; NULL outside one or out of memory (the
 * caller then bounds each wait itself). */
sp__http_deadline_t *sp__http_deadline_new(int fd);
/* The read about to start must end by at_ns (sp_now_ns clock; 0: none). */
void sp__http_deadline_set(sp__http_deadline_t *d, uint64_t at_ns);
/* The read ended. */
void sp__http_deadline_clear(sp__http_deadline_t *d);
/* After a read that ended with -ECANCELED and sp__http_deadline_clear():
 * did the deadline cancel it? */
bool sp__http_deadline_expired(const sp__http_deadline_t *d);
void sp__http_deadline_free(sp__http_deadline_t *d);
/* sp__http_read_lent ending by deadline (0: none), enforced by d's timer;
 * d NULL: by each wait's own timeout. -ETIMEDOUT at the deadline
 * (http_io.c). */
ssize_t sp__http_read_by(sp__http_deadline_t *d, int fd, sp_tls_conn_t *tls, sp_buf_t *in,
                         bool *borrowed, size_t size, uint64_t deadline, bool *drained);

/* ---- responses: http_response.c ------------------------------------------ */

struct sp_http_response {
    sp__http_out_t *out;
    const char *server_line; /* "Server: spindle\r\n" or "" */
    size_t server_len;       /* strlen(server_line) */
    unsigned server_id;      /* the server's id */
    /* The server's: an answer laid out after a stop began says
     * "Connection: close" (the connection closes after it). */
    const _Atomic bool *stopping;
    int status;
    int version;         /* of the request: 10 or 11 */
    bool head_only;      /* HEAD: headers, no body */
    bool close;          /* Connection: close, then close */
    bool started;        /* headers sent */
    bool chunked;        /* streamed body in chunks */
    bool has_length;     /* the handler set Content-Length */
    bool failed;         /* a write failed or the length came out wrong */
    bool detached;       /* the connection went to another protocol
                            (sp__http_take_over): nothing more is sent */
    uint64_t length;     /* the handler's Content-Length */
    uint64_t sent;       /* body bytes written so far */
    sp_buf_t head;       /* the handler's header lines, "Name: value\r\n" */
    sp_buf_t body;
};

void sp__http_res_init(sp_http_response_t *res, sp__http_out_t *out,
                       const sp_http_server_t *srv);
void sp__http_res_reset(sp_http_response_t *res);
void sp__http_res_free(sp_http_response_t *res);
/* After the handler: put the whole response (or the end of a streamed one)
 * into the output. false when the connection must close without more. */
bool sp__http_res_finish(sp_http_response_t *res);

/* ---- router: http_router.c ---------------------------------------------- */

/* sp_http_router_add; with `owned`, arg is freed with the router. */
int sp__http_router_add_owned(sp_http_router_t *r, sp_http_match_t kind,
                              const char *pattern, unsigned methods,
                              sp_http_handler_fn fn, void *arg, bool owned);

/* ---- dates: http_date.c -------------------------------------------------- */

#define SP__HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
/* "Date: <now>\r\n", SP__HTTP_DATE_LINE_LEN bytes, from a per-thread cache
 * rebuilt at most once a second; valid until the thread's next call. */
#define SP__HTTP_DATE_LINE_LEN (sizeof "Date: \r\n" - 1 + SP__HTTP_DATE_LEN)
const char *sp__http_date_line(void);
#define SP__HTTP_OK_LINE "HTTP/1.1 200 OK\r\n"
#define SP__HTTP_SERVER_LINE_MAX (sizeof "Server: \r\n" + SP_HTTP_SERVER_NAME_MAX)
/* The start of most answers, SP__HTTP_OK_LINE, the server's line and the
 * Date line, kept per thread like the Date line: one copy per answer. */
typedef struct sp__http_ok {
    time_t sec;
    unsigned server; /* whose line it holds (0: none yet) */
    size_t len;
    char text[sizeof SP__HTTP_OK_LINE - 1 + SP__HTTP_SERVER_LINE_MAX + SP__HTTP_DATE_LINE_LEN];
} sp__http_ok_t;
extern _Thread_local sp__http_ok_t sp__http_ok;
/* Rebuild it for `server` at `now`. */
void sp__http_ok_build(const char *server_line, size_t server_len, unsigned server,
                       time_t now);
/* SP__HTTP_OK_LINE, the server's line (server_len bytes; `server`: the
 * server's id, never 0) and the Date line, in one string of *len bytes.
 * Inline: every answer asks, and the cache is rebuilt once a second. */
static inline const char *sp__http_ok_head(const char *server_line, size_t server_len,
                                           unsigned server, size_t *len)
{
    time_t now = time(NULL);
    if (now != sp__http_ok.sec || server != sp__http_ok.server)
        sp__http_ok_build(server_line, server_len, server, now);
    *len = sp__http_ok.len;
    return sp__http_ok.text;
}
void sp__http_date_format(time_t t, char out[SP__HTTP_DATE_LEN + 1]);
/* IMF-fixdate (and the obsolete RFC 850 and asctime forms); -1 if bad. */
time_t sp__http_date_parse(const char *s);

/* ---- the server: http_server.c, http_conn.c ------------------------------ */

typedef struct sp__http_conn sp__http_conn_t;

struct sp_http_server {
    sp_tcp_server_t *tcp;
    sp_http_handler_fn handler;
    void *arg;
    sp_http_server_opts_t opts; /* defaults filled in */
    /* The timeouts sp_http_server_set_timeouts() may change while the
     * server runs; connections read these, not opts. */
    _Atomic int64_t header_timeout_us, keepalive_timeout_us;
    char server_line[SP__HTTP_SERVER_LINE_MAX];
    unsigned id; /* for sp__http_ok_head(): never 0, none the same */
    sp_logger_t *access; /* NULL unless opts.access_log */
    _Atomic bool stopping;
    _Atomic int conns;
    _Atomic size_t body_bytes; /* request bodies held, all connections */
    pthread_mutex_t lock; /* the list of connections */
    sp__list_t list; /* of sp__http_conn_t */
    sp__slots_t n; /* counters, per thread: SP__HS_* */
};

/* The server's counters (sp_http_server_stats), one slot per thread. */
enum {
    SP__HS_CONNS, SP__HS_BAD, SP__HS_HANDLER_ERRORS, SP__HS_BUSY,
    SP__HS_STATUS,                          /* 5: by class */
    SP__HS_BYTES_IN = SP__HS_STATUS + 5,
    SP__HS_BYTES_OUT,
    SP__HS_LIMIT,                           /* SP_HTTP_LIMITS of them */
    SP__HS_LATENCY = SP__HS_LIMIT + SP_HTTP_LIMITS, /* BUCKETS + 1 */
    SP__HS_LATENCY_SUM = SP__HS_LATENCY + SP_HTTP_LATENCY_BUCKETS + 1, /* ns */
    SP__HS_COUNT
};
static inline void sp__http_count(sp_http_server_t *srv, int which, uint64_t n)
{
    sp__slots_add(&srv->n, (size_t)which, n);
}

/* The access log's line for an answer (http_access.c): its status, the
 * body bytes sent, and the time since the request's first byte. */
void sp__http_log_access(sp_http_server_t *srv, const sp_http_request_t *req, int status,
                         uint64_t sent, uint64_t start_ns);

/* The TCP server's connection handler (arg: the sp_http_server_t). */
void sp__http_serve(int fd, const sp_addr_t *peer, void *arg);
/* Shut down the connections waiting for a next request (stop). */
void sp__http_close_idle(sp_http_server_t *srv);
/* Connections waiting for a next request now (stats). */
uint64_t sp__http_count_idle(sp_http_server_t *srv);
/* A server connection handed over to another protocol (a WebSocket): its
 * answer `head` (the 101) is sent after what was waiting to go out, the
 * bytes read past the request move to `rest`, and the connection closes
 * once the handler returns. The socket, or -errno if the answer could not
 * be sent. */
int sp__http_take_over(sp_http_request_t *req, const char *head, size_t len,
                       sp_buf_t *rest);

#endif
