/* Whole-exchange and handler deadlines: the client's exchange_timeout_us
 * against a silent listener, a server trickling its answer and a late
 * answer (on a plain thread and in fibers, alone and inside a caller's
 * deadline scope); the server's handler_deadline_us (504, a handler that
 * answers after its timeout, the clock starting at the end of the
 * headers, a streamed body cut, off by default); a pipelined request's
 * latency timed from the answer before it. Real sockets on 127.0.0.1. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/task.h>
#include <spindle/timer.h>

#include "http_fixture.h"

enum { MS = 1000, LONG_WAIT_US = 10000000 };

/* ---- the server ------------------------------------------------------------ */

/* What the last /nap or /read handler's wait returned. */
static _Atomic int nap_rc = 1;

/* Sleeps ?ms=N, then answers "rested". A cut sleep fails the request,
 * unless ?answer=1: then the handler answers "cut short" itself. */
static int h_nap(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    const char *ms = sp_http_request_param(req, "ms");
    int rc = sp_sleep_us(strtoull(ms ? ms : "0", NULL, 10) * MS);
    atomic_store(&nap_rc, rc);
    if (rc < 0 && !sp_http_request_param(req, "answer"))
        return rc;
    const char *text = rc < 0 ? "cut short" : "rested";
    return sp_http_response_set_body(res, text, strlen(text));
}

/* A chunked body, a byte every 20 ms, until the client leaves. */
static int h_trickle(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    for (;;) {
        if (sp_http_response_write(res, "x", 1) < 0 || sp_http_response_flush(res) < 0)
            return -EPIPE;
        int rc = sp_sleep_us(20 * MS);
        if (rc < 0)
            return rc;
    }
}

/* Reads the body to its end with sp_http_body_read; its error, if any. */
static int h_read(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    char buf[64];
    ssize_t n;
    do
        n = sp_http_body_read(req, buf, sizeof buf);
    while (n > 0);
    atomic_store(&nap_rc, (int)n);
    return n < 0 ? (int)n : sp_http_response_set_body(res, "read", 4);
}

static void deadline_routes(sp_http_router_t *r)
{
    sp_http_router_add(r, SP_HTTP_EXACT, "/nap", SP_HTTP_M_ANY, h_nap, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/trickle", SP_HTTP_M_GET, h_trickle, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/read", SP_HTTP_M_POST, h_read, NULL);
}

static void start_with(int64_t handler_deadline_us, bool stream_bodies)
{
    server_extra_routes = deadline_routes;
    sp_http_server_opts_t o = {.handler_deadline_us = handler_deadline_us,
                               .stream_bodies = stream_bodies};
    server_start(&o);
}

static void start_plain(void)
{
    start_with(0, false);
}

static void start_100ms(void)
{
    start_with(100 * MS, false);
}

static void start_streaming_100ms(void)
{
    start_with(100 * MS, true);
}

static const char *url(const char *path)
{
    static char text[128];
    snprintf(text, sizeof text, "http://127.0.0.1:%d%s", sp_addr_port(&S.addr), path);
    return text;
}

/* ---- the client --------------------------------------------------------------- */

/* A client whose waits would each last 10 s, bounded to exchange_us a call. */
static sp_http_client_t *bounded_client(int64_t exchange_us)
{
    sp_http_client_opts_t o = {.connect_timeout_us = LONG_WAIT_US,
                               .timeout_us = LONG_WAIT_US,
                               .exchange_timeout_us = exchange_us};
    sp_http_client_t *cl = sp_http_client_create(&o);
    ck_assert_ptr_nonnull(cl);
    return cl;
}

/* A listener nobody accepts on: connections complete in the kernel's
 * backlog, requests are taken and never answered. Its URL in u. */
static int silent_listener(char *u, size_t size)
{
    sp_addr_t a;
    sp_addr_parse("127.0.0.1:0", &a);
    int l = sp_listen(&a, NULL);
    ck_assert_int_ge(l, 0);
    sp_addr_of_socket(l, false, &a);
    snprintf(u, size, "http://127.0.0.1:%d/", sp_addr_port(&a));
    return l;
}

/* GET u with cl: -ETIMEDOUT, no sooner than min_ms and well before a
 * per-wait timeout would end it. */
static void expect_cut(sp_http_client_t *cl, const char *u, uint64_t min_ms)
{
    sp_http_client_response_t *r = NULL;
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(sp_http_get(cl, u, &r), -ETIMEDOUT);
    ck_assert_ptr_null(r);
    ck_assert_uint_ge(ms_since(t0), min_ms);
    ck_assert_uint_lt(ms_since(t0), LONG_WAIT_US / MS / 2);
}

/* On the test's own thread: the waits poll, cut at the exchange's end. */
START_TEST(client_exchange_deadline_silent_server)
{
    char u[64];
    int l = silent_listener(u, sizeof u);
    sp_http_client_t *cl = bounded_client(100 * MS);
    expect_cut(cl, u, 100);
    sp_http_client_destroy(cl);
    close(l);
}
END_TEST

START_TEST(client_exchange_deadline_trickled_answer)
{
    sp_http_client_t *cl = bounded_client(200 * MS);
    expect_cut(cl, url("/trickle"), 200);
    sp_http_client_destroy(cl);
}
END_TEST

static sp_http_client_t *fiber_client;
static char fiber_url[64];

static void trickle_in_fiber(void *arg)
{
    (void)arg;
    ck_assert_uint_eq(sp_deadline_current(), 0);
    expect_cut(fiber_client, url("/trickle"), 200);
    ck_assert_uint_eq(sp_deadline_current(), 0); /* the client's scope is gone */
}

/* In a task fiber, whose waits park: ended by the client's deadline scope. */
START_TEST(client_exchange_deadline_in_fiber)
{
    fiber_client = bounded_client(200 * MS);
    run_fibers(trickle_in_fiber, 1);
    sp_http_client_destroy(fiber_client);
}
END_TEST

/* The earlier deadline wins, the caller's or the exchange's, and the
 * caller's scope is as it was after the call. */
static void scopes_in_fiber(void *arg)
{
    (void)arg;
    sp_http_client_t *slow = bounded_client(LONG_WAIT_US), *quick = bounded_client(100 * MS);
    sp_deadline_t scope;
    uint64_t at = sp_now_ns() + 100 * 1000000ull;
    ck_assert_int_eq(sp_deadline_push(&scope, at), 0);
    expect_cut(slow, fiber_url, 0);
    ck_assert_uint_ge(sp_now_ns(), at);
    ck_assert_uint_eq(sp_deadline_current(), at);
    sp_deadline_pop(&scope);
    at = sp_now_ns() + (uint64_t)LONG_WAIT_US * 1000;
    ck_assert_int_eq(sp_deadline_push(&scope, at), 0);
    expect_cut(quick, fiber_url, 100);
    ck_assert_uint_eq(sp_deadline_current(), at);
    sp_deadline_pop(&scope);
    sp_http_client_destroy(slow);
    sp_http_client_destroy(quick);
}

START_TEST(client_exchange_deadline_within_caller_scope)
{
    int l = silent_listener(fiber_url, sizeof fiber_url);
    run_fibers(scopes_in_fiber, 1);
    close(l);
}
END_TEST

/* A connection cut short may still get the late answer: it is closed, so
 * the next request cannot read that answer as its own. */
START_TEST(client_cut_connection_not_pooled)
{
    sp_http_client_t *cl = bounded_client(100 * MS);
    expect_cut(cl, url("/nap?ms=300"), 100);
    sp_http_client_response_t *r;
    ck_assert_int_eq(sp_http_get(cl, url("/hello"), &r), 0);
    size_t n;
    const char *b = sp_http_client_response_body(r, &n);
    ck_assert_int_eq((int)n, 5);
    ck_assert_int_eq(memcmp(b, "hello", 5), 0);
    sp_http_client_response_free(r);
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.connections, 2);
    sp_http_client_destroy(cl);
}
END_TEST

/* ---- handler deadlines ---------------------------------------------------- */

/* Send req (the rest of a request begun at t0) on c: its handler saw
 * -ETIMEDOUT, and the answer is `status`, no sooner than the 100 ms
 * deadline and long before the handler's 5 s sleep would end. */
static void expect_cut_answer(client_t *c, uint64_t t0, const char *req, int status)
{
    resp_t r;
    roundtrip(c, req, &r);
    ck_assert_int_eq(r.status, status);
    ck_assert_uint_ge(ms_since(t0), 100);
    ck_assert_uint_lt(ms_since(t0), 5000);
    ck_assert_int_eq(atomic_load(&nap_rc), -ETIMEDOUT);
    resp_free(&r);
}

/* A handler whose sleep outlasts handler_deadline sees -ETIMEDOUT; failing,
 * it gets 504, and the connection serves the next request, which has its
 * own deadline. */
START_TEST(handler_deadline_504)
{
    client_t *c = client_open(&S.addr);
    expect_cut_answer(c, sp_now_ns(), GET("/nap?ms=5000"), 504);
    resp_t r;
    roundtrip(c, GET("/nap?ms=1"), &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(body_str(&r), "rested");
    resp_free(&r);
    client_close(c);
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.handler_errors, 1);
}
END_TEST

/* A handler that answers after its timeout is answered as it says. */
START_TEST(handler_deadline_handler_answers)
{
    check_body(GET("/nap?ms=5000&answer=1"), "cut short");
    ck_assert_int_eq(atomic_load(&nap_rc), -ETIMEDOUT);
}
END_TEST

/* The deadline runs from the end of the headers: a body that takes longer
 * leaves the handler no time. */
START_TEST(handler_deadline_counts_from_headers)
{
    client_t *c = client_open(&S.addr);
    uint64_t t0 = sp_now_ns();
    send_str(c, "POST /nap?ms=1 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n");
    struct timespec later = {0, 150 * 1000000L}; /* past the 100 ms */
    nanosleep(&later, NULL);
    expect_cut_answer(c, t0, "ab", 504);
    client_close(c);
}
END_TEST

/* A streamed body the client stops sending: the handler's read ends at
 * the handler's deadline (body_timeout is 60 s), unanswered: 408, close. */
START_TEST(handler_deadline_cuts_streamed_body)
{
    client_t *c = client_open(&S.addr);
    expect_cut_answer(c, sp_now_ns(),
                      "POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nab", 408);
    assert_closed(c);
    client_close(c);
}
END_TEST

/* Without the option a handler takes its time. */
START_TEST(handler_deadline_off_by_default)
{
    check_body(GET("/nap?ms=50"), "rested");
    ck_assert_int_eq(atomic_load(&nap_rc), 0);
}
END_TEST

/* A pipelined request already read when the answer before it was laid
 * out is timed from then (http.h, sp_http_server_stats_t.latency): behind
 * a 300 ms nap, a /nap?ms=0 sent in the same write takes microseconds,
 * not the 300 ms it spent buffered. Counted by the latency buckets: one
 * answer above 250 ms, one at most 250 ms. */
START_TEST(pipelined_latency_starts_at_previous_answer)
{
    static const uint64_t bounds[] = SP_HTTP_LATENCY_BOUNDS_US;
    sp_http_server_stats_t a, b;
    ck_assert_int_eq(sp_http_server_stats(S.http, &a), 0);
    client_t *c = client_open(&S.addr);
    send_str(c, "GET /nap?ms=300 HTTP/1.1\r\nHost: t\r\n\r\n"
                "GET /nap?ms=0 HTTP/1.1\r\nHost: t\r\n\r\n");
    for (int i = 0; i < 2; i++) {
        resp_t r;
        ck_assert_int_eq(get_response(c, &r, false), 0);
        ck_assert_int_eq(r.status, 200);
        resp_free(&r);
    }
    client_close(c);
    /* Both answers were laid out (and counted) before the second left. */
    ck_assert_int_eq(sp_http_server_stats(S.http, &b), 0);
    uint64_t fast = 0, slow = 0;
    for (int i = 0; i <= SP_HTTP_LATENCY_BUCKETS; i++) {
        uint64_t n = b.latency[i] - a.latency[i];
        if (i < SP_HTTP_LATENCY_BUCKETS && bounds[i] <= 250 * MS)
            fast += n;
        else
            slow += n;
    }
    ck_assert_uint_eq(slow, 1);
    ck_assert_uint_eq(fast, 1);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("http_deadline");
    ADD_CASE(s, "client", start_plain, server_stop, client_exchange_deadline_silent_server,
             client_exchange_deadline_trickled_answer, client_exchange_deadline_in_fiber,
             client_exchange_deadline_within_caller_scope, client_cut_connection_not_pooled,
             handler_deadline_off_by_default, pipelined_latency_starts_at_previous_answer);
    ADD_CASE(s, "handler", start_100ms, server_stop, handler_deadline_504,
             handler_deadline_handler_answers, handler_deadline_counts_from_headers);
    ADD_CASE(s, "streamed", start_streaming_100ms, server_stop,
             handler_deadline_cuts_streamed_body);
    return sp_test_run(s);
}
