/* spindle HTTP/1.1 server: requests parsed with http-parser, handlers
 * ("servlets") written as plain sequential code in the connection's fiber.
 *
 * A connection fiber reads requests, runs the handler for each one and
 * writes the responses in request order. Keep-alive is the HTTP/1.1
 * default (HTTP/1.0 only with "Connection: keep-alive"); pipelined requests
 * are parsed from the bytes already read, and their responses are written
 * together before the connection waits for more input.
 *
 * A request is complete (headers and the whole body, chunked or not, held
 * in memory up to max_body) before its handler runs. A handler fills in a
 * response: status, headers and a body that is sent with Content-Length
 * when the handler returns; or it streams with sp_http_response_write,
 * which sends the headers at once and the body in chunks (HTTP/1.0
 * clients: until the connection closes). Every response carries
 * Content-Length (0 for an empty body) or chunked encoding, except 1xx, 204
 * and 304, which have no body. HEAD runs the GET handler and sends the same
 * headers without the body.
 *
 * Bad input gets its status and, for errors in the request itself, the
 * connection is closed afterwards (its bytes can no longer be trusted):
 *   400 malformed request, bad percent-encoding, NUL in the path, missing
 *       Host in HTTP/1.1, Content-Length together with Transfer-Encoding,
 *       duplicate or invalid Content-Length, a transfer coding other than
 *       chunked (request smuggling defences);
 *   408 headers not complete within header_timeout (slowloris), or a body
 *       stalled for body_timeout;
 *   413 body over max_body (sent before reading the body, also instead of
 *       "100 Continue");
 *   414 request target over max_request_line;
 *   431 header lines over max_header_size in total, or over max_headers;
 *   500 handler returned an error (the connection stays usable);
 *   504 the same past its handler_deadline (the connection stays usable);
 *   503 more than max_conns connections (answered, then closed).
 * A connection idle between requests for keepalive_timeout is closed
 * without a response.
 *
 * Timeouts are deadlines on the wait for readiness (sp_io_wait), not
 * SO_RCVTIMEO: the header timeout bounds the whole header phase, so a
 * client that trickles one byte every few seconds still gets its 408.
 *
 * Errors: 0 or a negative errno; constructors return NULL and set errno.
 * Thread safety: a request and its response belong to the handler's fiber;
 * servers, routers and static handlers are read-only once started and may
 * be used by every worker at once.
 */
#ifndef SPINDLE_HTTP_H
#define SPINDLE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "spindle/iomanager.h"
#include "spindle/net.h"
#include "spindle/tcp_server.h"
#include "spindle/tls.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- methods ------------------------------------------------------------- */

typedef enum sp_http_method {
    SP_HTTP_GET,
    SP_HTTP_HEAD,
    SP_HTTP_POST,
    SP_HTTP_PUT,
    SP_HTTP_DELETE,
    SP_HTTP_PATCH,
    SP_HTTP_OPTIONS,
    SP_HTTP_TRACE,
    SP_HTTP_CONNECT,
    SP_HTTP_OTHER /* any other method http-parser knows (WebDAV...) */
} sp_http_method_t;

/* Method masks for routes. A route that allows GET allows HEAD too. */
#define SP_HTTP_M(m) (1u << (m))
#define SP_HTTP_M_GET SP_HTTP_M(SP_HTTP_GET)
#define SP_HTTP_M_HEAD SP_HTTP_M(SP_HTTP_HEAD)
#define SP_HTTP_M_POST SP_HTTP_M(SP_HTTP_POST)
#define SP_HTTP_M_PUT SP_HTTP_M(SP_HTTP_PUT)
#define SP_HTTP_M_DELETE SP_HTTP_M(SP_HTTP_DELETE)
#define SP_HTTP_M_ANY 0xffffffffu

/* "GET", "HEAD", ...; "OTHER" for SP_HTTP_OTHER. */
const char *sp_http_method_name(sp_http_method_t m);
/* The standard reason phrase of a status ("Not Found"), "" if unknown. */
const char *sp_http_status_reason(int status);

/* ---- requests ------------------------------------------------------------ */

typedef struct sp_http_request sp_http_request_t;

/* Every string below is NUL-terminated and owned by the request: valid
 * until the handler returns. */
sp_http_method_t sp_http_request_method(const sp_http_request_t *req);
/* The method as sent ("GET", "PROPFIND"). */
const char *sp_http_request_method_name(const sp_http_request_t *req);
/* The request target exactly as sent ("/a%20b?x=1"). */
const char *sp_http_request_target(const sp_http_request_t *req);
/* The path, percent-decoded ("/a b"); never contains NUL bytes. */
const char *sp_http_request_path(const sp_http_request_t *req);
/* The query string as sent, without '?' ("" when there is none). */
const char *sp_http_request_query(const sp_http_request_t *req);
/* The first query parameter called name, decoded ('+' is a space), or NULL.
 * A parameter without '=' has the value "". */
const char *sp_http_request_param(const sp_http_request_t *req, const char *name);
size_t sp_http_request_nparams(const sp_http_request_t *req);
/* The i-th parameter in order. 0 or -ERANGE. */
int sp_http_request_param_at(const sp_http_request_t *req, size_t i,
                             const char **name, const char **value);
/* The first header called name (case-insensitive), value without the
 * surrounding whitespace, or NULL. */
const char *sp_http_request_header(const sp_http_request_t *req, const char *name);
size_t sp_http_request_nheaders(const sp_http_request_t *req);
int sp_http_request_header_at(const sp_http_request_t *req, size_t i,
                              const char **name, const char **value);
/* The body (chunked bodies already decoded); *len may be 0. Never NULL.
 * With stream_bodies: only the bytes read with the headers and not yet
 * returned by sp_http_body_read (use that). */
const void *sp_http_request_body(const sp_http_request_t *req, size_t *len);
/* Read up to cap more bytes of the body (decoded) into buf, waiting for
 * them with the server's body timeouts; "100 Continue" is sent at the
 * first wait. Works on a buffered body too. Returns the bytes read, 0 at
 * the end of the body, or -errno: -ETIMEDOUT (stalled, over
 * body_deadline or past handler_deadline_us), -EMSGSIZE (over max_body),
 * -EBUSY (over max_buffered_bodies), -EPROTO (malformed body or the client
 * went away).
 * After an error, or a body not read to its end, the connection closes
 * after the answer; a handler that returns after an error without having
 * sent anything gets the server's answer (408, 413, 503 or 400). */
ssize_t sp_http_body_read(sp_http_request_t *req, void *buf, size_t cap);
/* 10 for HTTP/1.0, 11 for HTTP/1.1. */
int sp_http_request_version(const sp_http_request_t *req);
/* Whether the connection stays open after this request. */
bool sp_http_request_keep_alive(const sp_http_request_t *req);
const sp_addr_t *sp_http_request_peer(const sp_http_request_t *req);

/* ---- responses ----------------------------------------------------------- */

typedef struct sp_http_response sp_http_response_t;

/* Status, 200 unless set (100-599; -EINVAL otherwise, -EALREADY once the
 * headers are sent). */
int sp_http_response_set_status(sp_http_response_t *res, int status);
int sp_http_response_status(const sp_http_response_t *res);
/* Add a header line; set_header replaces every header of that name first.
 * Names and values are copied; CR, LF or NUL in either gives -EINVAL (no
 * header injection). Date, Server, Connection and Transfer-Encoding are the
 * server's own and give -EPERM. Setting Content-Length fixes the length of
 * a streamed body instead of chunked encoding. -EALREADY after the headers
 * went out. */
int sp_http_response_add_header(sp_http_response_t *res, const char *name,
                                const char *value);
int sp_http_response_set_header(sp_http_response_t *res, const char *name,
                                const char *value);
/* A header line checked and formatted once, for a handler that adds the
 * same header to many responses: adding it is then one copy. The rules of
 * add_header apply when it is made; NULL with errno EINVAL, EPERM or
 * ENOMEM. It does not change and may be used from any thread at once;
 * free it once no handler will add it again. */
typedef struct sp_http_header sp_http_header_t;
sp_http_header_t *sp_http_header_new(const char *name, const char *value);
void sp_http_header_free(sp_http_header_t *h);
/* sp_http_response_add_header(res, name, value) with h's. */
int sp_http_response_add_prepared(sp_http_response_t *res, const sp_http_header_t *h);
/* Buffered body: replaced by set_body, extended by append. Sent with
 * Content-Length when the handler returns. 0 or -ENOMEM. */
int sp_http_response_set_body(sp_http_response_t *res, const void *p, size_t n);
int sp_http_response_append(sp_http_response_t *res, const void *p, size_t n);
/* Streaming: the first call sends the headers (chunked encoding unless a
 * Content-Length header was set; HTTP/1.0: the body ends with the
 * connection), then everything buffered and p as body bytes. Bytes may be
 * held briefly to be sent together; sp_http_response_flush pushes them to
 * the socket. n (flush: 0), or -errno when the client is gone or too slow
 * (the handler should return then; the connection is closed). */
ssize_t sp_http_response_write(sp_http_response_t *res, const void *p, size_t n);
int sp_http_response_flush(sp_http_response_t *res);
/* Send len bytes of a regular file from offset with sendfile(2): sends the
 * headers with Content-Length: len (or checks a Content-Length set by the
 * handler) and then the file. Once per response, nothing buffered with it.
 * 0 or -errno (-EALREADY if the headers were already sent). */
int sp_http_response_sendfile(sp_http_response_t *res, int file_fd, off_t offset,
                              size_t len);
/* Whether the headers are out (status and headers can no longer change). */
bool sp_http_response_started(const sp_http_response_t *res);

/* ---- handlers ------------------------------------------------------------ */

/* A handler ("servlet"): fill in res from req. Return 0, or a negative
 * errno on failure: the client then gets 500 if nothing was sent yet (504
 * past handler_deadline_us), otherwise the connection is closed (the body
 * is cut short). */
typedef int (*sp_http_handler_fn)(sp_http_request_t *req, sp_http_response_t *res,
                                  void *arg);

/* Answer with a status, a short text/plain body and an optional extra
 * header (name NULL: none). Resets what the handler set before. */
int sp_http_response_error(sp_http_response_t *res, int status, const char *name,
                           const char *value);

/* ---- router -------------------------------------------------------------- */

typedef struct sp_http_router sp_http_router_t;

typedef enum sp_http_match {
    SP_HTTP_EXACT,  /* the path equals the pattern */
    SP_HTTP_PREFIX, /* the path is the pattern or below it: "/api" matches
                       "/api" and "/api/x", not "/apix" */
    SP_HTTP_GLOB    /* fnmatch(3) with FNM_PATHNAME: wildcards stay within a segment */
} sp_http_match_t;

/* NULL + errno (ENOMEM). */
sp_http_router_t *sp_http_router_create(void);
void sp_http_router_destroy(sp_http_router_t *r);
/* Register before the server starts. Lookup order: exact routes, then the
 * longest matching prefix, then globs in the order added, then the default
 * handler, then 404. A path that matches only routes not allowing the
 * method gets 405 with an Allow header. methods: SP_HTTP_M_* bits.
 * 0, -EINVAL, -ENOMEM. */
int sp_http_router_add(sp_http_router_t *r, sp_http_match_t kind, const char *pattern,
                       unsigned methods, sp_http_handler_fn fn, void *arg);
void sp_http_router_set_default(sp_http_router_t *r, sp_http_handler_fn fn, void *arg);
/* A handler: pass it with the router as arg to sp_http_server_create. */
int sp_http_router_dispatch(sp_http_request_t *req, sp_http_response_t *res, void *router);

/* ---- static files -------------------------------------------------------- */

typedef struct sp_http_static sp_http_static_t;

typedef struct sp_http_static_opts {
    const char *strip_prefix; /* removed from the path first ("/static"); NULL: none */
    const char *index;        /* served for a directory; NULL = "index.html" */
    int max_age;              /* Cache-Control max-age in seconds; 0: no header */
} sp_http_static_opts_t;

/* Serve the files under root (must be a directory). GET and HEAD; directory
 * paths without a trailing slash are redirected (301) to add one; If-
 * Modified-Since gives 304; a single "Range: bytes=" range gives 206 (416 if
 * unsatisfiable). No path leaves the root: ".." segments (decoded) are
 * refused with 403, and so is a file whose real path, symbolic links
 * resolved, is outside the root. opts may be NULL. NULL + errno. */
sp_http_static_t *sp_http_static_create(const char *root, const sp_http_static_opts_t *opts);
void sp_http_static_destroy(sp_http_static_t *st);
/* A handler: arg is the sp_http_static_t. */
int sp_http_static_handler(sp_http_request_t *req, sp_http_response_t *res, void *st);
/* The Content-Type for a file name, by extension ("application/octet-stream"
 * if unknown). */
const char *sp_http_mime_type(const char *path);

/* ---- server -------------------------------------------------------------- */

/* Limits and timeouts. Zero-initialise and set what you need: 0 means the
 * default given here, a negative timeout means none. */
typedef struct sp_http_server_opts {
    size_t max_request_line; /* request target, bytes; 8 KiB; over: 414 */
    size_t max_header_size;  /* header lines together; 16 KiB; over: 431 */
    int max_headers;         /* header lines; 100; over: 431 */
    size_t max_body;         /* request body (decoded); 1 MiB; over: 413 */
    bool no_body;            /* refuse every request body (413), as a
                                max_body of 0 would if 0 did not mean the
                                default; max_body is then ignored */
    int64_t header_timeout_us;    /* from a request's first byte to the end of
                                     its headers; 10 s; over: 408, close. Also
                                     bounds a new connection's wait for its
                                     first byte (silent close) */
    int64_t keepalive_timeout_us; /* idle between requests; 60 s; silent close */
    int64_t body_timeout_us;      /* wait for the next bytes of a body; 60 s;
                                     over: 408, close */
    int64_t send_timeout_us;      /* wait for the client to take response
                                     bytes; 60 s; over: close */
    int64_t body_deadline_us;     /* the whole body, from the end of the
                                     headers; 120 s; over: 408, close (a
                                     body trickled a byte at a time cannot
                                     hold a connection longer) */
    size_t max_buffered_bodies; /* request body bytes held in memory by all
                                   connections together; 64 x max_body;
                                   over: 503, close */
    bool stream_bodies;      /* run handlers when the headers are complete:
                                they read the body with sp_http_body_read,
                                so it is never held whole in memory */
    int max_conns;           /* open connections; 0 = the TCP server's
                                default (sp_tcp_default_max_conns), < 0 =
                                none; over: 503. tcp.max_conns 0: an
                                eighth more plus 16, refused without an
                                answer */
    const char *server_name; /* Server header; NULL = "spindle", "" = none;
                                as sp_http_server_check_name() */
    bool access_log;         /* one INFO line per request on the logger
                                "http.access": peer, method, target,
                                status, body bytes sent, duration in µs */
    int64_t handler_deadline_us; /* run each handler inside a deadline scope
                                    (spindle/task.h) ending this long after
                                    the end of its request's headers; 0 or
                                    negative: none (the default). Its waits
                                    then end with -ETIMEDOUT; an error
                                    returned with nothing sent: 504 */
    sp_tcp_server_opts_t tcp; /* backlog, stacks, refusal limit...; accepted
                                 sockets always get TCP_NODELAY */
    sp_tls_config_t *tls;     /* HTTPS: every connection starts with a TLS
                                 handshake with this server config
                                 (spindle/tls.h; the caller's, kept until
                                 the server is destroyed); NULL: plain */
} sp_http_server_opts_t;

/* Defaults, as numbers (also used for the 0 fields above). */
#define SP_HTTP_DEFAULT_MAX_REQUEST_LINE (8u * 1024u)
#define SP_HTTP_DEFAULT_MAX_HEADER_SIZE (16u * 1024u)
#define SP_HTTP_DEFAULT_MAX_HEADERS 100
#define SP_HTTP_DEFAULT_MAX_BODY (1024u * 1024u)
#define SP_HTTP_DEFAULT_HEADER_TIMEOUT_US 10000000LL
#define SP_HTTP_DEFAULT_KEEPALIVE_TIMEOUT_US 60000000LL
#define SP_HTTP_DEFAULT_BODY_TIMEOUT_US 60000000LL
#define SP_HTTP_DEFAULT_SEND_TIMEOUT_US 60000000LL
#define SP_HTTP_DEFAULT_BODY_DEADLINE_US 120000000LL
#define SP_HTTP_DEFAULT_BUFFERED_BODIES 64 /* times max_body */

/* Longest server_name, in bytes. */
#define SP_HTTP_SERVER_NAME_MAX 117

typedef struct sp_http_server sp_http_server_t;

/* Whether sp_http_server_create takes `name` as its server_name: 0,
 * -EINVAL (control bytes other than tab), -ENAMETOOLONG (longer than
 * SP_HTTP_SERVER_NAME_MAX). For configurations checked before a server
 * starts. */
int sp_http_server_check_name(const char *name);

/* The kinds of limit a request can be refused by (stats.limits). */
enum {
    SP_HTTP_LIMIT_TIMEOUT, /* 408: headers or body too slow */
    SP_HTTP_LIMIT_BODY,    /* 413: body over max_body */
    SP_HTTP_LIMIT_URI,     /* 414: request target too long */
    SP_HTTP_LIMIT_HEADERS, /* 431: header section too big */
    SP_HTTP_LIMIT_BUSY,    /* 503: max_conns, or the bodies held in memory */
    SP_HTTP_LIMITS
};

/* The latency buckets' upper bounds, in microseconds (stats.latency). */
#define SP_HTTP_LATENCY_BOUNDS_US                                                      {100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,      1000000, 2500000, 5000000, 10000000}
#define SP_HTTP_LATENCY_BUCKETS 16

typedef struct sp_http_server_stats {
    uint64_t connections; /* accepted and served */
    uint64_t requests;    /* responses sent (any status) */
    uint64_t bad_requests; /* refused and closed: 400 408 413 414 431 505 */
    uint64_t handler_errors; /* handlers that returned an error */
    uint64_t busy;         /* answered 503 (connections, bodies) */
    uint64_t body_bytes;   /* request body bytes held in memory now */
    uint64_t status[5];    /* responses by class: [0] 1xx ... [4] 5xx */
    uint64_t bytes_in, bytes_out; /* read from and sent to clients */
    uint64_t active;       /* connections open now */
    uint64_t idle;         /* of those, waiting for a next request */
    uint64_t limits[SP_HTTP_LIMITS]; /* requests refused, by limit */
    /* Responses by time from the request's first byte (a pipelined one
     * already read when the previous answer was laid out: from then) to
     * its response being laid out: latency[i] those within bound i of
     * SP_HTTP_LATENCY_BOUNDS_US (not cumulative), latency[BUCKETS] the
     * slower ones; their sum in microseconds. */
    uint64_t latency[SP_HTTP_LATENCY_BUCKETS + 1];
    uint64_t latency_sum_us;
} sp_http_server_stats_t;

/* handler(req, res, arg) serves every request (a router's dispatch, a
 * static handler, your own). opts may be NULL. NULL + errno. */
sp_http_server_t *sp_http_server_create(sp_iomanager_t *io, sp_http_handler_fn handler,
                                        void *arg, const sp_http_server_opts_t *opts);
/* As sp_tcp_server_listen / _naddrs / _addr / _start. */
int sp_http_server_listen(sp_http_server_t *srv, const sp_addr_t *addr);
int sp_http_server_naddrs(const sp_http_server_t *srv);
int sp_http_server_addr(const sp_http_server_t *srv, int i, sp_addr_t *out);
int sp_http_server_start(sp_http_server_t *srv);
/* Graceful stop from any thread or fiber: no new connections; idle
 * keep-alive connections are closed at once; requests in progress get
 * their response (with Connection: close) until drain_us, then their
 * connections are shut down; WebSocket endpoints waiting in sp_ws_recv
 * send close 1001 at once (spindle/websocket.h). Returns when every
 * connection is gone. */
int sp_http_server_stop(sp_http_server_t *srv, int64_t drain_us);
/* Change the header and keep-alive timeouts of a running server, from any
 * thread (a configuration reload). Same meaning as in opts: 0 the default,
 * negative none. A wait already under way keeps its deadline; every later
 * wait, on new and open connections alike, uses the new values. */
void sp_http_server_set_timeouts(sp_http_server_t *srv, int64_t header_timeout_us,
                                 int64_t keepalive_timeout_us);
/* 0 (the shape of every sp_*_stats). The counters are kept per thread
 * and summed here: each is exact once the server is stopped, and a read
 * during traffic may miss the last updates of each thread. */
int sp_http_server_stats(const sp_http_server_t *srv, sp_http_server_stats_t *out);
/* Its TCP server's counts for address i (sp_tcp_server_addr_stats). */
int sp_http_server_addr_stats(const sp_http_server_t *srv, int i, sp_tcp_server_stats_t *out);
void sp_http_server_destroy(sp_http_server_t *srv);

/* ---- client -------------------------------------------------------------- */

/* A fiber-based HTTP/1.1 client for http:// and https:// with a pool of
 * kept-alive connections per scheme, host and port (TLS connections are
 * kept alive too). In an IOManager fiber every wait parks the fiber; on a
 * plain thread it blocks that thread (poll). A client may be shared by any
 * number of fibers and threads. */
typedef struct sp_http_client sp_http_client_t;

typedef struct sp_http_client_opts {
    int64_t connect_timeout_us; /* TCP connect and TLS handshake; 10 s */
    int64_t timeout_us;         /* each wait to send or receive; 30 s */
    int max_idle_per_host;      /* pooled connections per host:port; 8; < 0 none */
    int64_t idle_timeout_us;    /* pooled connections older are closed; 30 s */
    size_t max_response;        /* response body; 8 MiB; over: -EMSGSIZE */
    int64_t exchange_timeout_us; /* the whole sp_http_client_do: connect (or
                                    take a pooled connection), send, receive
                                    the whole answer; 0 or negative: none
                                    (the default) */
    /* https://: a client config (sp_tls_client_config; the caller keeps
     * it and frees it after the client). NULL: the process's default
     * config, made on first use: the system CA store. The certificate is
     * verified and must name the URL's host (sent as SNI unless it is an
     * IP address). */
    sp_tls_config_t *tls;
} sp_http_client_opts_t;

/* opts may be NULL (zero fields: the defaults above). NULL + errno. */
sp_http_client_t *sp_http_client_create(const sp_http_client_opts_t *opts);
/* Close the pooled connections; no request may be running. */
void sp_http_client_destroy(sp_http_client_t *c);

typedef struct sp_http_client_request {
    const char *method;          /* NULL: GET */
    const char *url;             /* "http[s]://host[:port]/path?query" */
    /* "Name: value" strings, NULL-terminated; or NULL. A Host line replaces
     * the URL's; Content-Length and Transfer-Encoding are refused (-EINVAL):
     * the client frames the body. */
    const char *const *headers;
    const void *body;            /* sent with Content-Length (NULL: none) */
    size_t body_len;
} sp_http_client_request_t;

typedef struct sp_http_client_response sp_http_client_response_t;

/* Send the request and read the whole response (chunked, by length, or up
 * to the server's close; none for HEAD, 1xx, 204 and 304). When a pooled
 * connection fails before any byte of an answer (the server closed it
 * meanwhile), an idempotent request (GET, HEAD, OPTIONS, TRACE, PUT,
 * DELETE) is sent again, once, on a new connection; any other may have
 * been processed and fails with -ECONNRESET. A server that answers before
 * taking the whole body (a 413) and closes: its answer is returned. A 101
 * answer is returned and its connection closed. timeout_us bounds each
 * wait, exchange_timeout_us the whole exchange: in a task fiber as a
 * deadline scope, which an enclosing scope of the caller can only shorten;
 * on a plain thread by cutting each wait (name resolution is not bounded).
 * An exchange cut short closes its connection (never pooled). 0 and *out
 * (free it), or -errno: -EINVAL
 * (bad URL, method or header; body_len without body), -EPROTONOSUPPORT
 * (neither http:// nor https://), -ENOENT (no such host), -ECONNREFUSED,
 * -ETIMEDOUT, -ECONNRESET (closed before the answer was complete),
 * -EMSGSIZE, -EPROTO (not HTTP/1), SP_TLS_EVERIFY (the server's
 * certificate is not trusted or does not name the host),
 * SP_TLS_EHANDSHAKE (no TLS handshake: not a TLS server, no common
 * version or cipher); sp_tls_error_reason() says why right after the
 * call. */
int sp_http_client_do(sp_http_client_t *c, const sp_http_client_request_t *rq,
                      sp_http_client_response_t **out);
/* Shorthands for sp_http_client_do. */
int sp_http_get(sp_http_client_t *c, const char *url, sp_http_client_response_t **out);
/* content_type NULL: no Content-Type header. */
int sp_http_post(sp_http_client_t *c, const char *url, const char *content_type,
                 const void *body, size_t len, sp_http_client_response_t **out);

int sp_http_client_response_status(const sp_http_client_response_t *r);
/* First header of that name (case-insensitive), or NULL; strings live as
 * long as the response. */
const char *sp_http_client_response_header(const sp_http_client_response_t *r,
                                           const char *name);
const void *sp_http_client_response_body(const sp_http_client_response_t *r, size_t *len);
void sp_http_client_response_free(sp_http_client_response_t *r);

#ifdef __cplusplus
}
#endif
#endif
