/* HTTP/1.1 client: one request at a time per connection, connections kept
 * alive in a pool per host:port and scheme; https:// over the TLS layer
 * (http_client_dial.c).
 *
 * Responses are parsed by the server's own parser glue in response mode
 * (http_parse.c), so headers, chunked bodies and limits work the same way
 * on both sides. I/O is the server's too, plain or TLS: sends through
 * sp__http_out_flush, reads through sp__http_read_lent, each wait bounded
 * by the client's timeout and, with exchange_timeout_us, by the whole
 * exchange's deadline; both park in fibers and poll on plain threads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http_client_internal.h"
#include "http_internal.h"
#include "spindle/task.h"

struct sp_http_client {
    sp_http_client_opts_t opts;
    sp_http_server_opts_t limits; /* for the response parser */
    sp__http_pool_t pool;
};

struct sp_http_client_response {
    sp_http_request_t msg; /* status, headers, body */
};

enum { READ_SIZE = 16384 };

sp_http_client_t *sp_http_client_create(const sp_http_client_opts_t *opts)
{
    sp_http_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        errno = ENOMEM;
        return NULL;
    }
    if (opts)
        c->opts = *opts;
    sp_http_client_opts_t *o = &c->opts;
    o->connect_timeout_us = o->connect_timeout_us ? o->connect_timeout_us : 10000000;
    o->timeout_us = o->timeout_us ? o->timeout_us : 30000000;
    o->max_idle_per_host = o->max_idle_per_host ? o->max_idle_per_host : 8;
    o->idle_timeout_us = o->idle_timeout_us > 0 ? o->idle_timeout_us : 30000000;
    o->max_response = o->max_response ? o->max_response : 8u << 20;
    c->limits = (sp_http_server_opts_t){.max_header_size = 64 * 1024,
                                        .max_headers = 256,
                                        .max_body = o->max_response};
    sp__http_pool_init(&c->pool, o->max_idle_per_host, o->idle_timeout_us);
    return c;
}

void sp_http_client_destroy(sp_http_client_t *c)
{
    if (!c)
        return;
    sp__http_pool_destroy(&c->pool);
    free(c);
}

/* ---- the request ---------------------------------------------------------- */

/* Is header line h ("Name: value") called name? */
static bool named(const char *h, const char *name)
{
    size_t n = strlen(name);
    return !strncasecmp(h, name, n) && h[n] == ':';
}

/* A "Name: value" line from the caller: a token, a colon, a value without
 * control bytes (a tab is fine). The message's framing is ours: a caller's
 * Content-Length or Transfer-Encoding could contradict the body we send
 * (two lengths, or both, is how requests get smuggled past proxies). */
static bool valid_header(const char *h)
{
    const char *colon = strchr(h, ':');
    size_t name = sp__http_token_span(h, SIZE_MAX);
    if (!colon || !name || h + name != colon)
        return false;
    return sp__http_field_value_ok(colon + 1) && !named(h, "content-length") &&
           !named(h, "transfer-encoding");
}

static int add(sp_buf_t *b, const char *s)
{
    return sp__buf_append(b, s, strlen(s));
}

static int build(sp_buf_t *b, const sp_http_client_request_t *rq, const sp__http_target_t *t)
{
    const char *m = rq->method ? rq->method : "GET";
    if (!sp__http_is_token(m) || (rq->body_len && !rq->body))
        return -EINVAL;
    for (const char *const *h = rq->headers; h && *h; h++)
        if (!valid_header(*h))
            return -EINVAL;
    /* Appends fail only for memory: collect that once (one statement per
     * append, as the order of operands of | is unspecified). */
    bool own_host = false; /* the caller names the virtual host */
    for (const char *const *h = rq->headers; h && *h; h++)
        own_host |= named(*h, "host");
    int rc = add(b, m);
    rc |= add(b, " ");
    rc |= sp__buf_append(b, t->path, t->path_len);
    rc |= sp__buf_append(b, t->query, t->query_len);
    rc |= add(b, " HTTP/1.1\r\n");
    if (!own_host) {
        rc |= add(b, "Host: ");
        rc |= add(b, t->host);
        rc |= add(b, "\r\n");
    }
    for (const char *const *h = rq->headers; h && *h; h++) {
        rc |= add(b, *h);
        rc |= add(b, "\r\n");
    }
    bool needs_length = rq->body_len || !strcmp(m, "POST") || !strcmp(m, "PUT") ||
                        !strcmp(m, "PATCH");
    if (needs_length) {
        char cl[48];
        snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", rq->body_len);
        rc |= add(b, cl);
    }
    rc |= add(b, "\r\n");
    return rc ? -ENOMEM : 0;
}

/* ---- one exchange on one connection ----------------------------------------- */

/* One sp_http_client_do: what to send where, and the whole exchange's
 * deadline (0: none). */
typedef struct call {
    sp_http_client_t *c;
    const sp__http_target_t *t;
    const sp_buf_t *req; /* the head */
    const sp_http_client_request_t *rq;
    uint64_t until_ns;
} call_t;

/* Parse what came: 0 the final answer is complete, 1 more is needed, or
 * -errno. Interim answers (100 Continue...) are skipped. */
static int parse(sp_http_request_t *m, sp_buf_t *in)
{
    while (sp__buf_len(in)) {
        sp__http_state_t st;
        size_t used = sp__http_req_feed(m, sp__buf_data(in), sp__buf_len(in), &st);
        sp__buf_consume(in, used);
        if (st == SP__HTTP_FAILED)
            return m->error == 413 ? -EMSGSIZE : -EPROTO;
        if (st == SP__HTTP_MORE)
            return 1;
        if (m->status == 101) { /* another protocol from here on: not ours */
            m->keep_alive = false;
            return 0;
        }
        if (m->status >= 200)
            return 0;
        sp__http_req_reset(m); /* the final answer may follow in the buffer */
    }
    return 1;
}

/* The server closed: that ends a body delimited by the close, and is an
 * error anywhere else. */
static int at_eof(sp_http_request_t *m)
{
    sp__http_state_t st;
    sp__http_req_feed(m, NULL, 0, &st);
    m->keep_alive = false;
    return st == SP__HTTP_DONE ? 0 : -ECONNRESET;
}

static int read_answer(const call_t *x, const sp__http_link_t *l, sp_http_request_t *m,
                       bool *answered)
{
    sp_buf_t in = SP_BUF_INIT;
    bool drained = false;
    int rc = 1;
    while (rc == 1) {
        if ((rc = parse(m, &in)) != 1)
            break;
        int64_t us = sp__http_cut_us(x->c->opts.timeout_us, x->until_ns);
        ssize_t n = us == 0 ? -ETIMEDOUT
                            : sp__http_read_lent(l->fd, l->tls, &in, NULL, READ_SIZE,
                                                 sp__http_deadline(us), &drained);
        if (n > 0)
            *answered = true;
        else
            rc = n < 0 ? (int)n : at_eof(m);
    }
    if (sp__buf_len(&in)) /* bytes after the answer: the connection is confused */
        m->keep_alive = false;
    sp_buf_free(&in);
    return rc;
}

static int exchange(const call_t *x, const sp__http_link_t *l, sp_http_request_t *m,
                    bool *answered)
{
    const sp_http_client_request_t *rq = x->rq;
    sp__http_out_t o = {.fd = l->fd, .tls = l->tls, .buf = SP_BUF_INIT,
                        .timeout_us = x->c->opts.timeout_us, .until_ns = x->until_ns};
    struct iovec v[2] = {{sp__buf_data(x->req), sp__buf_len(x->req)},
                         {(void *)rq->body, rq->body_len}};
    int rc = sp__http_out_flush(&o, v, rq->body ? 2 : 1);
    sp_buf_free(&o.buf);
    if (rc == -EPIPE || rc == -ECONNRESET) {
        /* The server may have answered early (a 413 for a body it will not
         * take) and closed: its answer, if it came, beats the send error. */
        int answer = read_answer(x, l, m, answered);
        m->keep_alive = false;
        return *answered && answer == 0 ? 0 : rc;
    }
    return rc < 0 ? rc : read_answer(x, l, m, answered);
}

/* Methods a server must treat alike however often they come (RFC 9110
 * 9.2.2): only these are sent again without the caller asking. */
static bool idempotent(const char *m)
{
    static const char *const safe[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
    for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++)
        if (!strcmp(m, safe[i]))
            return true;
    return false;
}

/* A pooled connection the server closed just as it was taken fails before
 * any byte of an answer. An idempotent request then goes again, once, on a
 * new connection; any other may have been processed (the server can read a
 * request and close without answering), so its caller hears of it. */
static int run(const call_t *x, sp_http_request_t *m)
{
    sp_http_client_t *c = x->c;
    bool may_retry = idempotent(x->rq->method ? x->rq->method : "GET"), use_pool = true;
    for (;;) {
        sp__http_link_t l;
        bool pooled = use_pool && sp__http_pool_take(&c->pool, x->t->key, x->t->tls, &l);
        int rc = pooled ? 0
                        : sp__http_dial(x->t, c->opts.tls, c->opts.connect_timeout_us,
                                        x->until_ns, &l);
        if (rc < 0)
            return rc;
        bool answered = false;
        rc = exchange(x, &l, m, &answered);
        /* An error, a deadline's included, leaves the connection in an
         * unknown state: closed (without a close_notify), never pooled. */
        if (rc == 0 && m->keep_alive && c->opts.max_idle_per_host > 0)
            sp__http_pool_give(&c->pool, x->t->key, l);
        else
            sp__http_link_close(&l, rc == 0);
        if (rc == 0 || !pooled || answered || rc == -ETIMEDOUT || !may_retry)
            return rc;
        use_pool = false; /* the one retry dials */
        sp__http_req_reset(m);
    }
}

/* run() within exchange_timeout_us. In a task fiber a deadline scope ends
 * every wait at the deadline, the caller's earlier one if it has one; the
 * waits are cut at it as well, for plain threads (poll), where no scope
 * exists. */
static int run_bounded(call_t *x, sp_http_request_t *m)
{
    int64_t us = x->c->opts.exchange_timeout_us;
    if (us <= 0)
        return run(x, m);
    x->until_ns = sp__http_deadline(us);
    sp_deadline_t scope;
    bool scoped = sp_deadline_push(&scope, x->until_ns) == 0;
    int rc = run(x, m);
    if (scoped)
        sp_deadline_pop(&scope);
    return rc;
}

int sp_http_client_do(sp_http_client_t *c, const sp_http_client_request_t *rq,
                      sp_http_client_response_t **out)
{
    sp__http_target_t t;
    int rc = sp__http_parse_url(rq->url, "http", &t);
    if (rc < 0)
        return rc;
    sp_buf_t req = SP_BUF_INIT;
    sp_http_client_response_t *r = calloc(1, sizeof *r);
    rc = r ? build(&req, rq, &t) : -ENOMEM;
    if (rc == 0) {
        sp__http_msg_init(&r->msg, &c->limits, true);
        r->msg.skip_body = rq->method && !strcmp(rq->method, "HEAD");
        call_t x = {c, &t, &req, rq, 0};
        rc = run_bounded(&x, &r->msg);
    }
    sp_buf_free(&req);
    if (rc < 0) {
        sp_http_client_response_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int sp_http_get(sp_http_client_t *c, const char *url, sp_http_client_response_t **out)
{
    sp_http_client_request_t rq = {.url = url};
    return sp_http_client_do(c, &rq, out);
}

int sp_http_post(sp_http_client_t *c, const char *url, const char *content_type,
                 const void *body, size_t len, sp_http_client_response_t **out)
{
    char ct[256];
    if (content_type &&
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type) >= (int)sizeof ct)
        return -EINVAL;
    const char *headers[] = {content_type ? ct : NULL, NULL}; /* NULL: none */
    sp_http_client_request_t rq = {"POST", url, headers, body, len};
    return sp_http_client_do(c, &rq, out);
}

/* ---- the response ------------------------------------------------------------ */

int sp_http_client_response_status(const sp_http_client_response_t *r)
{
    return r->msg.status;
}

const char *sp_http_client_response_header(const sp_http_client_response_t *r,
                                           const char *name)
{
    return sp_http_request_header(&r->msg, name);
}

const void *sp_http_client_response_body(const sp_http_client_response_t *r, size_t *len)
{
    return sp_http_request_body(&r->msg, len);
}

void sp_http_client_response_free(sp_http_client_response_t *r)
{
    if (!r)
        return;
    sp__http_req_free(&r->msg);
    free(r);
}
