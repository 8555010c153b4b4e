/* HTTP server, connections: keep-alive rules, pipelining, parked handlers and
 * partial requests, HEAD, 100-continue, streamed responses, handler errors,
 * header/body/keep-alive timeouts and deadlines, request bodies (deadline,
 * server-wide cap, streaming) and the connection limit. Raw sockets on
 * 127.0.0.1. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/log.h>
#include <spindle/net.h>
#include <spindle/timer.h>

#include "http_fixture.h"

START_TEST(keep_alive_rules)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    char v[64];
    for (int i = 0; i < 3; i++) { /* 1.1: kept open by default */
        roundtrip(c, GET("/hello"), &r);
        ck_assert_int_eq(r.status, 200);
        resp_free(&r);
    }
    roundtrip(c, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r);
    ck_assert_str_eq(hdr(&r, "connection", v, sizeof v), "close");
    resp_free(&r);
    assert_closed(c);
    client_close(c);
    /* 1.0: closed unless asked otherwise. */
    c = client_open(&S.addr);
    roundtrip(c, "GET /hello HTTP/1.0\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "connection", v, sizeof v), "close");
    resp_free(&r);
    assert_closed(c);
    client_close(c);
    c = client_open(&S.addr);
    for (int i = 0; i < 2; i++) {
        roundtrip(c, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r);
        ck_assert_str_eq(hdr(&r, "connection", v, sizeof v), "keep-alive");
        resp_free(&r);
    }
    client_close(c);
}
END_TEST

/* A connection that parks with part of a request buffered keeps its bytes
 * while others on the same worker read and answer theirs (the worker's
 * input and output buffers are lent to one connection at a time). */
static void expect_echo_param(client_t *c, int n)
{
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 200);
    char want[32];
    snprintf(want, sizeof want, "param n=%d", n);
    ck_assert_ptr_nonnull(strstr(body_str(&r), want));
    resp_free(&r);
}

START_TEST(partial_request_survives_other_connections)
{
    for (int i = 0; i < 8; i++) {
        client_t *a = client_open(&S.addr), *b = client_open(&S.addr);
        send_str(a, "GET /echo?n=1 HTTP/1.1\r\nHost: t\r\n\r\nGET /echo?n=2 HTTP/1.1\r\nHo");
        expect_echo_param(a, 1); /* the rest of a's input waits for more */
        send_str(b, "GET /echo?n=3 HTTP/1.1\r\nHost: t\r\n\r\n");
        expect_echo_param(b, 3);
        send_str(a, "st: t\r\n\r\n");
        expect_echo_param(a, 2);
        client_close(a);
        client_close(b);
    }
}
END_TEST

/* The request's text and header table and the response's header lines and
 * body are the worker's, lent while one request is answered: a handler
 * that parks keeps them while another connection is read and answered. */
START_TEST(parked_handler_keeps_its_request_and_response)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, park_pipes[0]), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, park_pipes[1]), 0);
    sp_http_router_add(S.router, SP_HTTP_EXACT, "/park", SP_HTTP_M_GET, h_park, NULL);
    for (int i = 0; i < 8; i++) {
        client_t *a = client_open(&S.addr), *b = client_open(&S.addr);
        send_str(a, "GET /park?n=1 HTTP/1.1\r\nHost: t\r\nX-Test: aaaa\r\n\r\n");
        char x;
        ck_assert_int_eq(read(park_pipes[0][0], &x, 1), 1); /* a's handler waits */
        resp_t r;
        roundtrip(b, "GET /echo?n=2 HTTP/1.1\r\nHost: t\r\nX-Test: bbbb\r\n\r\n", &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_ptr_nonnull(strstr(body_str(&r), "x-test=bbbb"));
        ck_assert_ptr_nonnull(strstr(r.body, "param n=2"));
        resp_free(&r);
        ck_assert_int_eq(write(park_pipes[1][1], &x, 1), 1);
        ck_assert_int_eq(get_response(a, &r, false), 0);
        ck_assert_int_eq(r.status, 200);
        char v[64];
        ck_assert_str_eq(hdr(&r, "x-who", v, sizeof v), "aaaa");
        ck_assert_str_eq(body_str(&r), "before=aaaa,after=aaaa,n=1");
        resp_free(&r);
        client_close(a);
        client_close(b);
    }
}
END_TEST

START_TEST(pipelining_hundred_in_one_write)
{
    enum { N = 100 };
    static char reqs[N * 128];
    size_t len = 0;
    for (int i = 0; i < N; i++) {
        if (i % 10 == 3) /* some with a body, to keep the parser honest */
            len += (size_t)sprintf(reqs + len,
                                   "POST /echo?n=%d HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
                                   i);
        else
            len += (size_t)sprintf(reqs + len, "GET /echo?n=%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
    }
    client_t *c = client_open(&S.addr);
    ck_assert_int_eq(sp_write_full(c->fd, reqs, len), (ssize_t)len);
    for (int i = 0; i < N; i++) {
        resp_t r;
        ck_assert_int_eq(get_response(c, &r, false), 0);
        ck_assert_int_eq(r.status, 200);
        char want[32];
        snprintf(want, sizeof want, "param n=%d", i);
        ck_assert_ptr_nonnull(strstr(body_str(&r), want));
        ck_assert(strstr(r.body, "body=3:abc") ? i % 10 == 3 : i % 10 != 3);
        resp_free(&r);
    }
    /* Still usable afterwards. */
    resp_t r;
    roundtrip(c, GET("/hello"), &r);
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    client_close(c);
}
END_TEST

START_TEST(head_has_headers_without_body)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    char v[64];
    roundtrip(c, "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "5");
    resp_free(&r);
    roundtrip(c, "HEAD /static/a.txt HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "16");
    resp_free(&r);
    roundtrip(c, "HEAD /stream HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    ck_assert_str_eq(hdr(&r, "transfer-encoding", v, sizeof v), "chunked");
    resp_free(&r);
    /* No body bytes were sent: the next answer starts right here. */
    roundtrip(c, GET("/hello"), &r);
    ck_assert_str_eq(body_str(&r), "hello");
    resp_free(&r);
    client_close(c);
}
END_TEST

START_TEST(expect_100_continue)
{
    client_t *c = client_open(&S.addr);
    send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                "Content-Length: 4\r\n\r\n");
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0); /* before any body byte */
    ck_assert_int_eq(r.status, 100);
    send_str(c, "data");
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(body_str(&r), "body=4:data"));
    resp_free(&r);
    /* Too big: 413 instead of 100, and the connection closes. */
    send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                "Content-Length: 99999999\r\n\r\n");
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 413);
    resp_free(&r);
    assert_closed(c);
    client_close(c);
}
END_TEST

START_TEST(streamed_response_chunked_and_http10)
{
    /* Chunks for HTTP/1.1; HTTP/1.0 has none: the body ends with the
     * connection. */
    const char *reqs[] = {GET("/stream"), "GET /stream HTTP/1.0\r\n\r\n"};
    const char *te[] = {"chunked", NULL}, *conn[] = {NULL, "close"};
    resp_t r;
    for (int i = 0; i < 2; i++) {
        char v[64];
        r = once(reqs[i]);
        ck_assert_int_eq(r.status, 200);
        ck_assert_pstr_eq(hdr(&r, "transfer-encoding", v, sizeof v), te[i]);
        ck_assert_pstr_eq(hdr(&r, "connection", v, sizeof v), conn[i]);
        ck_assert_str_eq(body_str(&r), "one,two,three");
        resp_free(&r);
    }
    /* Streamed with a Content-Length set first: no chunks. */
    r = once(GET("/fixed"));
    char v[64];
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "10");
    ck_assert_str_eq(hdr(&r, "x-twice", v, sizeof v), "2");
    ck_assert_ptr_null(strstr(r.head, "X-Twice: 1"));
    ck_assert_ptr_null(strstr(r.head, "Injected"));
    ck_assert_str_eq(body_str(&r), "0123456789");
    resp_free(&r);
    /* A big buffered body arrives whole. */
    r = once(GET("/big"));
    ck_assert_uint_eq(r.body_len, 3u << 20);
    for (size_t i = 0; i < r.body_len; i += 4099)
        ck_assert_int_eq(r.body[i], 'a' + (int)(i % 26));
    resp_free(&r);
}
END_TEST

START_TEST(handler_error_500_and_connection_survives)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    roundtrip(c, GET("/fail"), &r);
    ck_assert_int_eq(r.status, 500);
    ck_assert_str_eq(body_str(&r), "500 Internal Server Error\n"); /* not "partial" */
    resp_free(&r);
    roundtrip(c, GET("/hello"), &r);
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    client_close(c);
    /* Failing after the headers went out: the body is cut short, closed. */
    c = client_open(&S.addr);
    send_str(c, GET("/fail-late"));
    ck_assert_int_eq(get_response(c, &r, false), -1);
    resp_free(&r);
    client_close(c);
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.handler_errors, 2);
    ck_assert_int_eq(status_of(GET("/hello")), 200);
}
END_TEST

/* ---- timeouts (short ones, set per test) ----------------------------------- */

/* A server with 300 ms header and body timeouts and this keep-alive. */
static void start_short_timeouts(int64_t keepalive_us)
{
    sp_http_server_opts_t o = {.header_timeout_us = 300000,
                               .keepalive_timeout_us = keepalive_us,
                               .body_timeout_us = 300000,
                               .server_name = "test-server/1"};
    server_start(&o);
}

static void setup_short_timeouts(void)
{
    start_short_timeouts(200000);
}

START_TEST(slowloris_gets_408)
{
    client_t *c = client_open(&S.addr);
    uint64_t t0 = sp_now_ns();
    send_str(c, "GET /hello HTTP/1.1\r\n");
    /* A header byte every 50 ms: each read is quick, the phase is not. */
    resp_t r;
    int rc = -1;
    for (int i = 0; i < 40; i++) {
        struct pollfd p = {c->fd, POLLIN, 0};
        if (poll(&p, 1, 50) == 1) {
            rc = get_response(c, &r, false);
            break;
        }
        if (write(c->fd, "X", 1) != 1)
            break;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(r.status, 408);
    uint64_t took = ms_since(t0);
    ck_assert_uint_ge(took, 290);
    ck_assert_uint_lt(took, 1500);
    resp_free(&r);
    client_close(c);
    ck_assert_int_eq(status_of(GET("/hello")), 200);
}
END_TEST

START_TEST(stalled_body_gets_408)
{
    client_t *c = client_open(&S.addr);
    send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
    expect_408_closed(c, sp_now_ns());
}
END_TEST

/* ---- request bodies: the whole body's deadline, the server-wide cap, streaming */

enum { BODY_MAX = 64 * 1024, BODIES_CAP = 100 * 1024 };

/* The body, read with sp_http_body_read in small pieces: its length and a
 * checksum, and the most body bytes the server held meanwhile. */
static int h_stream_sum(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    char buf[1000];
    uint64_t n = 0, sum = 0, held = 0;
    ssize_t got;
    while ((got = sp_http_body_read(req, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; i++)
            sum = sum * 31 + (unsigned char)buf[i];
        n += (uint64_t)got;
        sp_http_server_stats_t st;
        sp_http_server_stats(S.http, &st);
        held = st.body_bytes > held ? st.body_bytes : held;
    }
    if (got < 0)
        return (int)got;
    char text[96];
    int len = snprintf(text, sizeof text, "n=%llu sum=%llu held=%llu", (unsigned long long)n,
                       (unsigned long long)sum, (unsigned long long)held);
    return sp_http_response_set_body(res, text, (size_t)len);
}

/* Reads nothing of the body. */
static int h_ignore_body(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req, (void)arg;
    return sp_http_response_set_body(res, "ignored", 7);
}

static void setup_body_limits(void)
{
    sp_http_server_opts_t o = {.body_timeout_us = 10000000, .body_deadline_us = 300000,
                               .max_body = BODY_MAX, .max_buffered_bodies = BODIES_CAP};
    server_start(&o);
}

static void setup_streaming(void)
{
    sp_http_server_opts_t o = {.stream_bodies = true, .max_body = 64u << 20,
                               .body_deadline_us = 10000000};
    server_start(&o);
    sp_http_router_add(S.router, SP_HTTP_EXACT, "/sum", SP_HTTP_M_POST, h_stream_sum, NULL);
    sp_http_router_add(S.router, SP_HTTP_EXACT, "/ignore", SP_HTTP_M_POST, h_ignore_body,
                       NULL);
}

/* A body trickled a byte at a time, each in time for body_timeout, still
 * ends at body_deadline with 408. */
START_TEST(trickled_body_gets_408_at_its_deadline)
{
    client_t *c = client_open(&S.addr);
    send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
    uint64_t t0 = sp_now_ns();
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int sent = 0;
    /* A byte every 20 ms would take 20 s: the answer must come first. */
    while (poll(&pfd, 1, 20) == 0 && sent < 1000) {
        ck_assert_int_eq(write(c->fd, "x", 1), 1);
        sent++;
    }
    ck_assert_int_lt(sent, 1000);
    expect_408_closed(c, t0);
}
END_TEST

/* Bodies held by all connections together stay under max_buffered_bodies:
 * a second body that would go over gets 503, and once the first is gone
 * the same request is served. */
START_TEST(bodies_over_the_server_cap_get_503)
{
    enum { PART = 60 * 1024 };
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, park_pipes[0]), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, park_pipes[1]), 0);
    sp_http_router_add(S.router, SP_HTTP_EXACT, "/park", SP_HTTP_M_POST, h_park, NULL);
    char *body = repeat('b', PART);
    char *req = malloc(PART + 200);
    /* a's handler holds its body: the server counted all of it before the
     * handler ran and says so. */
    int n = snprintf(req, PART + 200,
                     "POST /park?n=1 HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n"
                     "Content-Length: %d\r\n\r\n%s", PART, body);
    client_t *a = client_open(&S.addr);
    ck_assert_int_eq(sp_write_full(a->fd, req, (size_t)n), n);
    char x;
    ck_assert_int_eq(read(park_pipes[0][0], &x, 1), 1);
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.body_bytes, PART);
    n = snprintf(req, PART + 200, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s",
                 PART, body);
    expect_refused(req, (size_t)n, 503);
    /* a's body is let go once it is answered: a next request on the same
     * connection is read only after that. */
    ck_assert_int_eq(write(park_pipes[1][1], &x, 1), 1);
    resp_t r;
    ck_assert_int_eq(get_response(a, &r, false), 0);
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    roundtrip(a, GET("/hello"), &r);
    resp_free(&r);
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.body_bytes, 0);
    client_close(a);
    client_t *b = client_open(&S.addr);
    roundtrip(b, req, &r);
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    client_close(b);
    free(req);
    free(body);
}
END_TEST

/* With stream_bodies a handler reads an 8 MiB body (and a chunked one) in
 * pieces while the server holds only a few reads' worth; "100 Continue"
 * is sent when the handler first waits for the body. */
START_TEST(streamed_body_read_in_pieces)
{
    enum { BIG = 8 << 20 };
    char *body = malloc(BIG);
    uint64_t sum = 0;
    for (size_t i = 0; i < BIG; i++) {
        body[i] = (char)('a' + i % 23);
        sum = sum * 31 + (unsigned char)body[i];
    }
    client_t *c = client_open(&S.addr);
    char head[160], want[96];
    snprintf(head, sizeof head, "POST /sum HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
             "Content-Length: %d\r\n\r\n", BIG);
    send_str(c, head);
    char line[64];
    ck_assert_int_eq(take_line(c, line, sizeof line), 0);
    ck_assert_str_eq(line, "HTTP/1.1 100 Continue");
    ck_assert_int_eq(take_line(c, line, sizeof line), 0);
    ck_assert_str_eq(line, "");
    ck_assert_int_eq(sp_write_full(c->fd, body, BIG), BIG);
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 200);
    unsigned long long held;
    const char *h = strstr(body_str(&r), "held=");
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(sscanf(h, "held=%llu", &held), 1);
    snprintf(want, sizeof want, "n=%d sum=%llu held=%llu", BIG, (unsigned long long)sum, held);
    ck_assert_str_eq(r.body, want);
    ck_assert_uint_lt(held, 256 * 1024);
    resp_free(&r);
    /* Chunked, on the same connection. */
    roundtrip(c, "POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(body_str(&r), "n=5 sum=92599395 "));
    resp_free(&r);
    client_close(c);
    free(body);
}
END_TEST

/* A streamed body the handler leaves unread closes the connection after
 * the answer; one that fails gets the server's status. */
START_TEST(streamed_body_unread_or_failing)
{
    client_t *c = client_open(&S.addr);
    send_str(c, "POST /ignore HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhel");
    expect_200_then_close(c);
    refused("POST /sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\nabc\r\nZZ\r\n", 400);
}
END_TEST

START_TEST(idle_keepalive_closed_silently)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    char v[64];
    roundtrip(c, GET("/hello"), &r);
    ck_assert_str_eq(hdr(&r, "server", v, sizeof v), "test-server/1");
    resp_free(&r);
    uint64_t t0 = sp_now_ns();
    assert_closed(c); /* EOF, no 408 */
    ck_assert_uint_ge(ms_since(t0), 190);
    ck_assert_uint_lt(ms_since(t0), 2000);
    client_close(c);
    /* A connection that never sends a byte: closed after header_timeout. */
    c = client_open(&S.addr);
    t0 = sp_now_ns();
    assert_closed(c);
    ck_assert_uint_ge(ms_since(t0), 290);
    client_close(c);
}
END_TEST

/* Read deadlines are enforced by one lazily re-armed timer per connection
 * (http_deadline.c): a deadline that moves later must not close early, one
 * that comes earlier than the armed timer must still be kept. */
static void setup_long_keepalive(void)
{
    start_short_timeouts(2000000);
}

START_TEST(keepalive_deadline_moves_with_each_request)
{
    client_t *c = client_open(&S.addr);
    uint64_t t0 = sp_now_ns();
    /* 2.5 s of requests 100 ms apart: past the first request's keep-alive
     * deadline, never idle for more than a twentieth of it. */
    for (int i = 0; i < 25; i++) {
        resp_t r;
        roundtrip(c, GET("/hello"), &r);
        ck_assert_int_eq(r.status, 200);
        resp_free(&r);
        poll(NULL, 0, 100);
    }
    ck_assert_uint_ge(ms_since(t0), 2000);
    client_close(c);
}
END_TEST

START_TEST(stalled_second_request_gets_408_before_keepalive)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    roundtrip(c, GET("/hello"), &r);
    resp_free(&r);
    /* Idle long enough for the connection's timer to re-arm for the
     * keep-alive deadline (2 s after the request), well short of it. */
    poll(NULL, 0, 500);
    uint64_t t0 = sp_now_ns();
    send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\n"); /* no end of head */
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 408);
    /* The header timeout (300 ms), not the keep-alive deadline 1.5 s
     * later that the timer was armed for. */
    ck_assert_uint_ge(ms_since(t0), 290);
    ck_assert_uint_lt(ms_since(t0), 1200);
    resp_free(&r);
    client_close(c);
}
END_TEST

static void setup_two_conns(void)
{
    sp_http_server_opts_t o = {.max_conns = 2, .server_name = ""};
    server_start(&o);
}

START_TEST(over_max_conns_503)
{
    client_t *a = client_open(&S.addr), *b = client_open(&S.addr);
    resp_t r;
    char v[64];
    roundtrip(a, GET("/hello"), &r);
    ck_assert_ptr_null(hdr(&r, "server", v, sizeof v)); /* server_name "" */
    resp_free(&r);
    roundtrip(b, GET("/hello"), &r);
    resp_free(&r);
    client_t *c = client_open(&S.addr);
    roundtrip(c, GET("/hello"), &r);
    ck_assert_int_eq(r.status, 503);
    resp_free(&r);
    client_close(c);
    roundtrip(a, GET("/hello"), &r); /* the others go on */
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    client_close(b);
    /* b's slot frees once the server sees its close; bounded retries. */
    int status = 0;
    for (int i = 0; i < 100 && status != 200; i++) {
        status = status_of(GET("/hello"));
        if (status != 200)
            usleep(10000);
    }
    ck_assert_int_eq(status, 200);
    client_close(a);
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_ge(st.busy, 1);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("http_conn");
    ADD_CASE(s, "conn", setup_default, server_stop, keep_alive_rules,
             pipelining_hundred_in_one_write, partial_request_survives_other_connections,
             parked_handler_keeps_its_request_and_response, head_has_headers_without_body,
             expect_100_continue, streamed_response_chunked_and_http10,
             handler_error_500_and_connection_survives);
    ADD_CASE(s, "timeouts", setup_short_timeouts, server_stop, slowloris_gets_408,
             stalled_body_gets_408, idle_keepalive_closed_silently);
    ADD_CASE(s, "deadlines", setup_long_keepalive, server_stop,
             keepalive_deadline_moves_with_each_request,
             stalled_second_request_gets_408_before_keepalive);
    ADD_CASE(s, "limits", setup_two_conns, server_stop, over_max_conns_503);
    /* This one stops the server itself. */
    ADD_CASE(s, "bodies", setup_body_limits, server_stop, trickled_body_gets_408_at_its_deadline,
             bodies_over_the_server_cap_get_503);
    ADD_CASE(s, "streaming", setup_streaming, server_stop, streamed_body_read_in_pieces,
             streamed_body_unread_or_failing);
    return sp_test_run(s);
}
