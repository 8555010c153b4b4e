/* Prepared response headers (sp_http_header_new): the rules they are made
 * under, what a client receives, a prepared Content-Length, and one header
 * shared by the handlers of both workers at once. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/http.h>

#include "http_fixture.h"

static sp_http_header_t *x_prepared, *type_json, *length_5;

START_TEST(made_under_add_header_rules)
{
    struct {
        const char *name, *value;
        int err;
    } bad[] = {
        {NULL, "v", EINVAL}, {"X-A", NULL, EINVAL}, {"", "v", EINVAL},
        {"Bad Name", "v", EINVAL}, {"X-Evil", "a\r\nInjected: 1", EINVAL},
        {"X-Evil", "a\nb", EINVAL}, {"Date", "x", EPERM}, {"connection", "x", EPERM},
        {"Content-Length", "12a", EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(sp_http_header_new(bad[i].name, bad[i].value));
        ck_assert_int_eq(errno, bad[i].err);
    }
    sp_http_header_free(NULL);
}
END_TEST

/* Two prepared headers and a body. */
static int h_prepared(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    ck_assert_int_eq(sp_http_response_add_prepared(res, NULL), -EINVAL);
    int rc = sp_http_response_add_prepared(res, x_prepared);
    if (rc == 0)
        rc = sp_http_response_add_prepared(res, type_json);
    return rc < 0 ? rc : sp_http_response_set_body(res, "{}", 2);
}

/* A prepared Content-Length fixes a streamed body's length, once. */
static int h_prepared_length(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    ck_assert_int_eq(sp_http_response_add_prepared(res, length_5), 0);
    ck_assert_int_eq(sp_http_response_add_prepared(res, length_5), -EINVAL);
    ck_assert_int_eq(sp_http_response_add_header(res, "Content-Length", "5"), -EINVAL);
    ck_assert_int_eq(sp_http_response_write(res, "hello", 5), 5);
    ck_assert_int_eq(sp_http_response_add_prepared(res, x_prepared), -EALREADY);
    return 0;
}

static void prepared_routes(sp_http_router_t *r)
{
    sp_http_router_add(r, SP_HTTP_EXACT, "/prepared", SP_HTTP_M_GET, h_prepared, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/prepared-length", SP_HTTP_M_GET,
                       h_prepared_length, NULL);
}

static void setup_prepared(void)
{
    x_prepared = sp_http_header_new("X-Prepared", "yes, once");
    type_json = sp_http_header_new("Content-Type", "application/json");
    length_5 = sp_http_header_new("content-length", "5");
    ck_assert(x_prepared && type_json && length_5);
    server_extra_routes = prepared_routes;
    server_start(NULL);
}

static void teardown_prepared(void)
{
    server_stop();
    sp_http_header_free(x_prepared);
    sp_http_header_free(type_json);
    sp_http_header_free(length_5);
}

static void expect_prepared(client_t *c)
{
    resp_t r;
    char v[64];
    roundtrip(c, GET("/prepared"), &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "x-prepared", v, sizeof v), "yes, once");
    ck_assert_str_eq(hdr(&r, "content-type", v, sizeof v), "application/json");
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "2");
    ck_assert_str_eq(body_str(&r), "{}");
    resp_free(&r);
}

START_TEST(prepared_headers_reach_the_client)
{
    client_t *c = client_open(&S.addr);
    expect_prepared(c);
    resp_t r;
    char v[64];
    roundtrip(c, GET("/prepared-length"), &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "5");
    ck_assert_ptr_null(hdr(&r, "transfer-encoding", v, sizeof v));
    ck_assert_str_eq(body_str(&r), "hello");
    resp_free(&r);
    expect_prepared(c); /* the connection goes on */
    client_close(c);
}
END_TEST

/* Client fibers on two threads, the server's handlers on its two workers:
 * the same headers are added by both at once. */
enum { CLIENTS = 16, ROUNDS = 25 };
static _Atomic int answered;

static void prepared_client(void *arg)
{
    (void)arg;
    client_t *c = client_open(&S.addr);
    for (int i = 0; i < ROUNDS; i++)
        expect_prepared(c);
    client_close(c);
    atomic_fetch_add(&answered, ROUNDS);
}

START_TEST(one_header_shared_by_both_workers)
{
    run_fibers(prepared_client, CLIENTS);
    ck_assert_int_eq(atomic_load(&answered), CLIENTS * ROUNDS);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("http_prepared");
    ADD_CASE(s, "rules", NULL, NULL, made_under_add_header_rules);
    ADD_CASE(s, "server", setup_prepared, teardown_prepared, prepared_headers_reach_the_client,
             one_header_shared_by_both_workers);
    return sp_test_run(s);
}
