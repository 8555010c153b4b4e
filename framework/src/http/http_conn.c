/* One HTTP connection: read, parse, run the handler, answer; repeat while
 * the connection is kept alive. Runs in the TCP server's connection fiber.
 *
 * Input is read into a buffer and parsed from there; whatever follows a
 * complete request stays in the buffer for the next one (pipelining).
 * Responses are gathered in the output buffer and sent just before the
 * connection has to wait for input, so the answers to a burst of pipelined
 * requests leave in one send, in request order.
 *
 * Every read waits with a deadline taken from the phase (one timer per
 * connection enforces it, see http_deadline.c):
 *   idle      before a request's first byte: keepalive_timeout (header_timeout
 *             on a new connection); expiry closes silently;
 *   headers   from the first byte to the end of the headers: header_timeout,
 *             for the whole phase, so trickled bytes do not extend it; 408
 *             (the clock is read when the connection first has to wait, so
 *             pipelined requests already in the buffer never read it);
 *   body      each wait for more body bytes: body_timeout, and the whole
 *             body from the end of the headers: body_deadline; 408.
 * With stream_bodies the handler pulls the body itself (sp_http_body_read,
 * same deadlines); a body left unread closes the connection after the
 * answer. Reads: http_io.c (plain, or TLS with opts.tls). */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "http_internal.h"
#include "spindle/task.h"
#include "spindle/timer.h"

struct sp__http_conn {
    sp__link_t link; /* in the server's list, for stop() */
    sp_http_server_t *srv;
    int fd;
    _Atomic bool idle; /* waiting for a next request with nothing read */
    _Atomic bool upgraded; /* another protocol's now (sp__http_take_over) */
    bool drained;      /* the last read emptied the socket */
    bool in_borrowed;  /* `in` is the thread's input scratch */
    /* The same for the request's text and header table and the response's
     * header lines and body, lent as one set from the request's first
     * parsed byte until it is answered. */
    bool work_borrowed;
    bool continued;    /* "100 Continue" sent for this request */
    sp__http_deadline_t *deadline; /* NULL: each wait bounds itself */
    uint64_t start_ns; /* the request's first byte */
    /* When the last answer was laid out (count_response's clock read),
     * and out.waits then: the wait for a next request runs from it if the
     * flush after it did not wait (one clock read fewer per request). */
    uint64_t answered_ns;
    unsigned answered_waits;
    uint64_t out_counted; /* of out.written, the bytes in the stats */
    uint64_t body_deadline; /* the whole body's (0: not set yet, or none) */
    uint64_t handler_deadline; /* from the end of the headers (0: none) */
    sp_buf_t in;
    sp__http_out_t out;
    sp_http_request_t req;
    sp_http_response_t res;
};

enum { HEADER_READ = 4096, BODY_READ = 16384 };
enum { CLOSE = -1 }; /* read_request: close without an answer */
/* After an error answer, read and drop what the client still sends for a
 * while: closing at once would reset, destroying the answer in flight. */
enum { LINGER_US = 2000000, LINGER_BYTES = 1 << 20 };

/* ---- the list of connections ---------------------------------------------- */

static void link_conn(sp__http_conn_t *c)
{
    sp_http_server_t *srv = c->srv;
    pthread_mutex_lock(&srv->lock);
    sp__list_push_front(&srv->list, &c->link);
    pthread_mutex_unlock(&srv->lock);
}

static void unlink_conn(sp__http_conn_t *c)
{
    sp_http_server_t *srv = c->srv;
    pthread_mutex_lock(&srv->lock);
    sp__list_remove(&srv->list, &c->link);
    pthread_mutex_unlock(&srv->lock);
}

/* stop(): `stopping` is set before this runs, and a connection sets `idle`
 * before it reads `stopping`, so each idle connection is either shut down
 * here (its wait ends with EOF) or sees `stopping` itself; an upgraded one
 * has its reads ended here (writes still work: a WebSocket sends its close)
 * or sees `stopping` before its next read. The lock keeps the fd open: a
 * connection unlinks itself before its fd is closed. */
void sp__http_close_idle(sp_http_server_t *srv)
{
    pthread_mutex_lock(&srv->lock);
    for (sp__link_t *l = srv->list.head; l; l = l->next) {
        sp__http_conn_t *c = sp__list_entry(l, sp__http_conn_t, link);
        if (atomic_load(&c->idle))
            shutdown(c->fd, SHUT_RDWR);
        else if (atomic_load(&c->upgraded))
            shutdown(c->fd, SHUT_RD); /* its reader wakes and says goodbye */
    }
    pthread_mutex_unlock(&srv->lock);
}

uint64_t sp__http_count_idle(sp_http_server_t *srv)
{
    uint64_t n = 0;
    pthread_mutex_lock(&srv->lock);
    for (sp__link_t *l = srv->list.head; l; l = l->next)
        n += atomic_load(&sp__list_entry(l, sp__http_conn_t, link)->idle);
    pthread_mutex_unlock(&srv->lock);
    return n;
}

/* ---- reading ---------------------------------------------------------------- */

static ssize_t conn_read(sp__http_conn_t *c, size_t size, uint64_t deadline)
{
    ssize_t n = sp__http_read_by(c->deadline, c->fd, c->out.tls, &c->in, &c->in_borrowed, size,
                                 deadline, &c->drained);
    if (n > 0)
        sp__http_count(c->srv, SP__HS_BYTES_IN, (uint64_t)n);
    return n;
}

/* Wait for the first byte of a next request, visible to stop() meanwhile. */
static ssize_t read_idle(sp__http_conn_t *c, uint64_t deadline)
{
    atomic_store(&c->idle, true);
    ssize_t n = atomic_load(&c->srv->stopping) ? 0 : conn_read(c, HEADER_READ, deadline);
    atomic_store(&c->idle, false);
    return n;
}

/* A request's working memory is the thread's scratch (http_scratch.c)
 * from its first parsed byte until it is answered: a connection waiting
 * for its next request holds none, and a burst of new connections
 * allocates nothing for it. Borrowed while the request's text is empty,
 * which means the whole set is: the header table holds offsets of names
 * in the text, and the response's lines are laid out only after the
 * request was read and are cleared with it. Given back once the request
 * and the response are reset (all four empty). */
static void lend_work(sp__http_conn_t *c, bool borrow)
{
    sp_buf_t *const set[SP__WORK_BUFS] = {&c->req.text, &c->req.kvs, &c->res.head,
                                          &c->res.body};
    if (!borrow)
        sp__http_work_return(set, &c->work_borrowed);
    else if (!sp__buf_len(&c->req.text))
        sp__http_work_borrow(set, &c->work_borrowed);
}

/* Parse what is buffered. 0: a request is complete; a status: it failed;
 * 1: more bytes needed. */
static int parse_buffered(sp__http_conn_t *c)
{
    sp__http_state_t st;
    lend_work(c, true);
    size_t used = sp__http_req_feed(&c->req, sp__buf_data(&c->in), sp__buf_len(&c->in), &st);
    sp__buf_consume(&c->in, used);
    sp__http_scratch_return(&c->in, &c->in_borrowed, SP__SCRATCH_IN);
    return st == SP__HTTP_DONE ? 0 : st == SP__HTTP_FAILED ? c->req.error : 1;
}

/* The client asked to hear "100 Continue" before it sends the body; by
 * now the headers passed every check (a too-long body got 413 instead). */
static int maybe_continue(sp__http_conn_t *c)
{
    static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!c->req.expect_continue || c->continued)
        return 0;
    c->continued = true;
    return sp__buf_append(&c->out.buf, msg, sizeof msg - 1);
}

/* The deadline of the next wait for body bytes: body_timeout from now, or
 * the whole body's deadline if that comes first. */
static uint64_t body_wait_deadline(sp__http_conn_t *c)
{
    const sp_http_server_opts_t *o = &c->srv->opts;
    if (!c->body_deadline)
        c->body_deadline = sp__http_deadline(o->body_deadline_us);
    uint64_t wait = sp__http_deadline(o->body_timeout_us);
    if (!wait || (c->body_deadline && c->body_deadline < wait))
        return c->body_deadline;
    return wait;
}

/* The handler's deadline runs from the end of the request's headers, so
 * the time its body takes (read before the handler runs, unless streamed)
 * counts. The clock is read only when the option is on. */
static void note_headers_done(sp__http_conn_t *c)
{
    int64_t us = c->srv->opts.handler_deadline_us;
    if (us > 0 && c->req.headers_done && !c->handler_deadline)
        c->handler_deadline = sp__http_deadline(us);
}

/* Whether the clock read when the last answer was laid out still stands
 * for "now": only a flush that did not wait came since (TLS may wait inside
 * its writes). Saves a clock read per request. */
static bool answered_is_now(const sp__http_conn_t *c)
{
    return c->answered_ns && !c->out.tls && c->out.waits == c->answered_waits;
}

/* The deadline of the wait for a next request, us from now (< 0: none). */
static uint64_t idle_deadline(sp__http_conn_t *c, int64_t us)
{
    uint64_t then = answered_is_now(c) ? c->answered_ns : 0;
    c->answered_ns = 0;
    if (!then)
        return sp__http_deadline(us);
    return us < 0 ? 0 : then + (uint64_t)us * 1000u;
}

/* When a request began, for the latency stats and the access log: a
 * request already buffered when the last answer was laid out (pipelined)
 * begins then, unless an access log line was written since. */
static uint64_t request_start(const sp__http_conn_t *c)
{
    return answered_is_now(c) && !c->srv->access ? c->answered_ns : sp__now_ns();
}

/* Read until one request is complete (with stream_bodies: its headers).
 * 0, CLOSE, or an error status. */
static int read_request(sp__http_conn_t *c, bool first)
{
    bool begun = false;
    uint64_t header_deadline = 0; /* set at the first wait */
    for (;;) {
        if (sp__buf_len(&c->in)) {
            if (!begun)
                c->start_ns = request_start(c);
            begun = true;
            int rc = parse_buffered(c);
            note_headers_done(c);
            if (rc != 1)
                return rc;
        }
        bool body = c->req.headers_done;
        if (body && c->req.streaming)
            return 0;
        if ((body && maybe_continue(c) < 0) || sp__http_out_flush(&c->out, NULL, 0) < 0)
            return CLOSE;
        /* Before this fiber waits: */
        sp__http_scratch_return(&c->out.buf, &c->out.borrowed, SP__SCRATCH_OUT);
        int64_t header_us = atomic_load(&c->srv->header_timeout_us);
        if (begun && !body && !header_deadline)
            header_deadline = sp__http_deadline(header_us);
        ssize_t n = !begun ? read_idle(c, idle_deadline(
                                              c, first ? header_us
                                                       : atomic_load(&c->srv->keepalive_timeout_us)))
                    : body ? conn_read(c, BODY_READ, body_wait_deadline(c))
                           : conn_read(c, HEADER_READ, header_deadline);
        if (n > 0)
            continue;
        return n == -ETIMEDOUT && begun ? 408 : CLOSE;
    }
}

/* Read and drop what the client still sends, for a bounded time. */
static void linger(sp__http_conn_t *c)
{
    shutdown(c->fd, SHUT_WR);
    uint64_t deadline = sp__http_deadline(LINGER_US);
    size_t dropped = 0;
    while (dropped < LINGER_BYTES) {
        sp__buf_clear(&c->in);
        ssize_t n = conn_read(c, BODY_READ, deadline);
        if (n <= 0)
            break;
        dropped += (size_t)n;
    }
    sp__buf_clear(&c->in);
    sp__http_scratch_return(&c->in, &c->in_borrowed, SP__SCRATCH_IN);
}

/* ---- streamed bodies --------------------------------------------------------- */

/* A server's request is its connection's. */
static sp__http_conn_t *conn_of(sp_http_request_t *req)
{
    return (sp__http_conn_t *)(void *)((char *)req - offsetof(sp__http_conn_t, req));
}

/* Parse what is buffered of a streamed body, or read more (after a
 * "100 Continue" if the client waits for one and nothing was answered
 * yet). 0, or the status that ends the body. */
static int pull_body(sp__http_conn_t *c)
{
    if (sp__buf_len(&c->in)) {
        int rc = parse_buffered(c);
        return rc == 1 ? 0 : rc;
    }
    c->continued |= c->res.started;
    if (maybe_continue(c) < 0 || sp__http_out_flush(&c->out, NULL, 0) < 0)
        return 400;
    ssize_t n = conn_read(c, BODY_READ, body_wait_deadline(c));
    return n > 0 ? 0 : n == -ETIMEDOUT ? 408 : 400;
}

static ssize_t errno_of(int status)
{
    switch (status) {
    case 408: return -ETIMEDOUT;
    case 413: return -EMSGSIZE;
    case 503: return -EBUSY;
    default: return -EPROTO;
    }
}

ssize_t sp_http_body_read(sp_http_request_t *req, void *buf, size_t cap)
{
    for (;;) {
        size_t held = sp__buf_len(&req->body), have = held - req->body_off;
        if (have) {
            size_t n = have < cap ? have : cap;
            memcpy(buf, (const char *)sp__buf_data(&req->body) + req->body_off, n);
            req->body_off += n;
            if (req->streaming && req->body_off == held) {
                /* Read: a streamed body holds only what is not. */
                sp__buf_clear(&req->body);
                sp__http_body_release(req);
                req->body_off = 0;
            }
            return (ssize_t)n;
        }
        if (req->complete || !req->streaming)
            return 0;
        if (req->error)
            return errno_of(req->error);
        req->error = pull_body(conn_of(req));
    }
}

/* ---- answering ---------------------------------------------------------------- */

/* Inline: most servers keep no access log. */
static inline void access_log(sp__http_conn_t *c)
{
    if (c->srv->access)
        sp__http_log_access(c->srv, &c->req, c->res.status, c->res.sent, c->start_ns);
}

/* The bytes sent since the last count, into `mine` (sp__slots_mine). */
static void count_sent_to(sp__http_conn_t *c, _Atomic uint64_t *mine, bool shared)
{
    sp__slot_add(&mine[SP__HS_BYTES_OUT], c->out.written - c->out_counted, shared);
    c->out_counted = c->out.written;
}

static void count_sent(sp__http_conn_t *c)
{
    bool shared;
    _Atomic uint64_t *mine = sp__slots_mine(&c->srv->n, &shared);
    count_sent_to(c, mine, shared);
}

/* A response laid out: its status class, its time since the request's
 * first byte, and the bytes sent so far (responses leave in batches). One
 * slot lookup for all of them. */
static void count_response(sp__http_conn_t *c)
{
    static const uint64_t bounds_us[] = SP_HTTP_LATENCY_BOUNDS_US;
    uint64_t now = sp__now_ns(), ns = now - c->start_ns;
    c->answered_ns = now;
    c->answered_waits = c->out.waits;
    int b = 0;
    while (b < SP_HTTP_LATENCY_BUCKETS && ns > bounds_us[b] * 1000)
        b++;
    int status = c->res.status / 100;
    bool shared;
    _Atomic uint64_t *mine = sp__slots_mine(&c->srv->n, &shared);
    /* The requests are the sum of the classes: one add fewer. */
    sp__slot_add(&mine[SP__HS_STATUS + (status >= 1 && status <= 5 ? status - 1 : 4)], 1,
                 shared);
    sp__slot_add(&mine[SP__HS_LATENCY + b], 1, shared);
    sp__slot_add(&mine[SP__HS_LATENCY_SUM], ns, shared);
    count_sent_to(c, mine, shared);
}

/* A request refused with `status`: busy or bad, and the limit if one. */
static void count_refusal(sp_http_server_t *srv, int status)
{
    sp__http_count(srv, status == 503 ? SP__HS_BUSY : SP__HS_BAD, 1);
    int limit = status == 408   ? SP_HTTP_LIMIT_TIMEOUT
                : status == 413 ? SP_HTTP_LIMIT_BODY
                : status == 414 ? SP_HTTP_LIMIT_URI
                : status == 431 ? SP_HTTP_LIMIT_HEADERS
                : status == 503 ? SP_HTTP_LIMIT_BUSY
                                : -1;
    if (limit >= 0)
        sp__http_count(srv, SP__HS_LIMIT + limit, 1);
}

/* Lay out the response, count and log it; false: close the connection. */
static bool finish(sp__http_conn_t *c)
{
    if (c->res.detached) /* counted and logged at the upgrade */
        return false;
    bool ok = sp__http_res_finish(&c->res);
    count_response(c);
    access_log(c);
    return ok && !c->res.close;
}

int sp__http_take_over(sp_http_request_t *req, const char *head, size_t len,
                       sp_buf_t *rest)
{
    sp__http_conn_t *c = conn_of(req);
    c->res.status = 101;
    c->res.detached = c->res.close = c->res.started = true; /* no answer after */
    atomic_store(&c->upgraded, true);
    size_t n = sp__buf_len(&c->in);
    int rc = n ? sp__buf_append(rest, sp__buf_data(&c->in), n) : 0;
    sp_buf_clear(&c->in);
    sp__http_scratch_return(&c->in, &c->in_borrowed, SP__SCRATCH_IN);
    rc = rc < 0 ? rc : sp__buf_append(&c->out.buf, head, len);
    rc = rc < 0 ? rc : sp__http_out_flush(&c->out, NULL, 0);
    /* The new protocol may hold the connection long: the output scratch goes
     * back, and the 101 is counted and logged now (the upgrade's latency). */
    sp__http_scratch_return(&c->out.buf, &c->out.borrowed, SP__SCRATCH_OUT);
    count_response(c);
    access_log(c);
    return rc < 0 ? rc : c->fd;
}

static void prepare_response(sp__http_conn_t *c)
{
    sp_http_response_t *res = &c->res; /* reset: by init or forget_request() */
    res->version = c->req.version ? c->req.version : 11;
    /* The method is known once the request line is (an error in the
     * headers still answers a HEAD without a body). */
    bool method_known = c->req.target_done || c->req.target_len;
    res->head_only = method_known && c->req.parser.method == HTTP_HEAD;
    res->close = !c->req.headers_done || !sp__http_keeps_alive(&c->req);
}

/* After finish(): the response is laid out into the output, so the
 * request and the response are reset and their working set given back
 * before any wait for input; kept while the next pipelined request is
 * already buffered, which would borrow it again at once. */
static void forget_request(sp__http_conn_t *c)
{
    c->body_deadline = 0;
    c->handler_deadline = 0;
    sp__http_req_reset(&c->req);
    sp__http_res_reset(&c->res);
    if (!sp__buf_len(&c->in))
        lend_work(c, false);
}

/* The handler, inside its request's deadline scope if it has one. */
static int run_handler(sp__http_conn_t *c)
{
    sp_http_server_t *srv = c->srv;
    sp_deadline_t scope;
    bool scoped = c->handler_deadline && sp_deadline_push(&scope, c->handler_deadline) == 0;
    int rc = srv->handler(&c->req, &c->res, srv->arg);
    if (scoped)
        sp_deadline_pop(&scope);
    return rc;
}

/* A handler's error with nothing sent: 504 once its deadline has passed
 * (a timeout, told apart from the 503 of an overloaded server), else 500. */
static int error_status(const sp__http_conn_t *c)
{
    return c->handler_deadline && sp__now_ns() >= c->handler_deadline ? 504 : 500;
}

/* Run the handler for a complete request. false: close the connection. */
static bool handle(sp__http_conn_t *c)
{
    sp_http_server_t *srv = c->srv;
    prepare_response(c);
    sp__http_scratch_borrow(&c->out.buf, &c->out.borrowed, SP__SCRATCH_OUT);
    int rc = run_handler(c);
    if (c->req.streaming && !c->req.complete) {
        /* The body was not read to its end, or reading it failed: its
         * bytes can no longer be told from a next request's. */
        c->res.close = true;
        if (c->req.error && !c->res.started) {
            count_refusal(srv, c->req.error);
            rc = sp_http_response_error(&c->res, c->req.error, NULL, NULL);
        }
    }
    if (rc != 0) {
        sp__http_count(srv, SP__HS_HANDLER_ERRORS, 1);
        /* Streamed already (or the client went away meanwhile): only closing
         * tells the client it is cut short; counted and logged with the
         * bytes that went out. */
        if (c->res.started ||
            sp_http_response_error(&c->res, error_status(c), NULL, NULL) < 0) {
            if (!c->res.detached) { /* an upgrade was counted already */
                count_response(c);
                access_log(c);
            }
            forget_request(c);
            return false;
        }
    }
    bool keep = finish(c);
    forget_request(c);
    c->continued = false;
    return keep;
}

/* Answer an error in the request itself (or 503), then close. */
static void refuse(sp__http_conn_t *c, int status)
{
    count_refusal(c->srv, status);
    if (!c->start_ns)
        c->start_ns = sp__now_ns();
    prepare_response(c);
    c->res.close = true;
    sp_http_response_error(&c->res, status, NULL, NULL);
    finish(c);
    forget_request(c);
    if (sp__http_out_flush(&c->out, NULL, 0) == 0)
        linger(c);
}

static void conn_init(sp__http_conn_t *c, sp_http_server_t *srv, int fd,
                      const sp_addr_t *peer)
{
    memset(c, 0, sizeof *c);
    c->srv = srv;
    c->fd = fd;
    sp_buf_init(&c->in);
    c->out = (sp__http_out_t){
        .fd = fd, .buf = SP_BUF_INIT, .timeout_us = srv->opts.send_timeout_us};
    sp__http_req_init(&c->req, &srv->opts);
    c->req.peer = peer;
    c->req.body_pool = &srv->body_bytes;
    c->req.streaming = srv->opts.stream_bodies;
    sp__http_res_init(&c->res, &c->out, srv);
    c->deadline = sp__http_deadline_new(fd);
}

static void conn_free(sp__http_conn_t *c)
{
    count_sent(c);
    sp__buf_clear(&c->out.buf); /* the last flush sent it, or failed */
    sp__buf_clear(&c->in);
    sp__http_scratch_return(&c->in, &c->in_borrowed, SP__SCRATCH_IN);
    sp__http_scratch_return(&c->out.buf, &c->out.borrowed, SP__SCRATCH_OUT);
    forget_request(c);
    sp__http_deadline_free(c->deadline);
    sp__http_req_free(&c->req);
    sp__http_res_free(&c->res);
    sp_buf_free(&c->in);
    sp_buf_free(&c->out.buf);
}

static void serve_requests(sp__http_conn_t *c)
{
    for (bool first = true;; first = false) {
        c->start_ns = 0;
        int rc = read_request(c, first);
        if (rc > 0)
            refuse(c, rc);
        if (rc != 0 || !handle(c))
            break;
    }
    sp__http_out_flush(&c->out, NULL, 0);
    sp__http_scratch_return(&c->out.buf, &c->out.borrowed, SP__SCRATCH_OUT);
    if (sp__buf_len(&c->in)) /* pipelined requests after a close */
        linger(c);
}

void sp__http_serve(int fd, const sp_addr_t *peer, void *arg)
{
    sp_http_server_t *srv = arg;
    sp__http_count(srv, SP__HS_CONNS, 1);
    int active = atomic_fetch_add(&srv->conns, 1) + 1;
    sp__http_conn_t c;
    conn_init(&c, srv, fd, peer);
    link_conn(&c);
    /* HTTPS: the handshake first (the config bounds it); a client that
     * fails it is dropped. Its close_notify at the end is bounded too. */
    bool shook = !srv->opts.tls || sp_tls_accept(srv->opts.tls, fd, 0, &c.out.tls) == 0;
    if (shook && srv->opts.max_conns && active > srv->opts.max_conns)
        refuse(&c, 503);
    else if (shook)
        serve_requests(&c);
    if (c.out.tls)
        sp_tls_shutdown(c.out.tls, 100000);
    sp_tls_free(c.out.tls);
    unlink_conn(&c);
    conn_free(&c);
    atomic_fetch_sub(&srv->conns, 1);
}
