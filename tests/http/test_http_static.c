/* HTTP server, static files: served files and indexes, sendfile of big files,
 * no escape from the root, ranges and conditional requests, out of fds,
 * encoded redirects. Raw sockets on 127.0.0.1. */
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

START_TEST(static_files_served)
{
    char v[128];
    resp_t r = once(GET("/static/a.txt"));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(body_str(&r), "0123456789abcdef");
    ck_assert_str_eq(hdr(&r, "content-type", v, sizeof v), "text/plain; charset=utf-8");
    ck_assert_str_eq(hdr(&r, "cache-control", v, sizeof v), "max-age=60");
    ck_assert_ptr_nonnull(hdr(&r, "last-modified", v, sizeof v));
    resp_free(&r);
    r = once(GET("/static/"));
    ck_assert_str_eq(body_str(&r), "<h1>home</h1>\n");
    ck_assert_str_eq(hdr(&r, "content-type", v, sizeof v), "text/html; charset=utf-8");
    resp_free(&r);
    r = once(GET("/static/sub"));
    ck_assert_int_eq(r.status, 301);
    ck_assert_str_eq(hdr(&r, "location", v, sizeof v), "/static/sub/");
    resp_free(&r);
    check_body(GET("/static/sub/"), "sub index");
    r = once(GET("/static/empty.txt"));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "0");
    resp_free(&r);
    r = once(GET("/static/link-in")); /* a link that stays inside is fine */
    ck_assert_str_eq(body_str(&r), "0123456789abcdef");
    resp_free(&r);
    ck_assert_int_eq(status_of(GET("/static/missing.txt")), 404);
    ck_assert_int_eq(status_of(GET("/static/a.txt/x")), 404);
    ck_assert_int_eq(status_of(GET("/staticx/a.txt")), 404);
    ck_assert_int_eq(status_of("POST /static/a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"),
                     405);
    ck_assert_str_eq(sp_http_mime_type("x/y.PNG"), "image/png");
    ck_assert_str_eq(sp_http_mime_type("x.tar/noext"), "application/octet-stream");
}
END_TEST

START_TEST(static_big_file_sendfile)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    for (int round = 0; round < 2; round++) { /* twice on one connection */
        roundtrip(c, GET("/static/big.bin"), &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_uint_eq(r.body_len, 4u << 20);
        for (size_t i = 0; i < r.body_len; i += 1021)
            ck_assert_int_eq((unsigned char)r.body[i], (unsigned)((i * 7 + i / 4096) & 0xff));
        resp_free(&r);
    }
    client_close(c);
}
END_TEST

START_TEST(static_no_escape_from_root)
{
    char secret[128];
    snprintf(secret, sizeof secret, "GET /static/..%%2f%s-secret HTTP/1.1\r\nHost: t\r\n\r\n",
             strrchr(root_dir, '/') + 1);
    const char *attempts[] = {
        "GET /static/../etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /static/%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /static/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /static/sub/../../x HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /static/.. HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /static/link-out HTTP/1.1\r\nHost: t\r\n\r\n",
        secret,
    };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        resp_t r = once(attempts[i]);
        ck_assert_msg(r.status == 403 || r.status == 404, "%s: %d", attempts[i], r.status);
        ck_assert(!r.body || !memmem(r.body, r.body_len, "root:", 5));
        ck_assert(!r.body || !memmem(r.body, r.body_len, "secret", 6));
        resp_free(&r);
    }
    ck_assert_int_eq(status_of("GET /static/link-out HTTP/1.1\r\nHost: t\r\n\r\n"), 403);
    ck_assert_int_eq(status_of("GET /static/%2e%2e/x HTTP/1.1\r\nHost: t\r\n\r\n"), 403);
    /* An index that links elsewhere under the root is served; out: 403. */
    check_body(GET("/static/idx-in/"), "0123456789abcdef");
    ck_assert_int_eq(status_of(GET("/static/idx-out/")), 403);
    /* Dots that are not a ".." segment are ordinary names. */
    ck_assert_int_eq(status_of(GET("/static/..a.txt")), 404);
}
END_TEST

START_TEST(static_ranges_and_conditional)
{
    char v[128];
    resp_t r = once("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=2-5\r\n\r\n");
    ck_assert_int_eq(r.status, 206);
    ck_assert_str_eq(body_str(&r), "2345");
    ck_assert_str_eq(hdr(&r, "content-range", v, sizeof v), "bytes 2-5/16");
    resp_free(&r);
    check_body("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-3\r\n\r\n", "def");
    r = once("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=10-\r\n\r\n");
    ck_assert_str_eq(body_str(&r), "abcdef");
    ck_assert_str_eq(hdr(&r, "content-range", v, sizeof v), "bytes 10-15/16");
    resp_free(&r);
    check_body("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=14-99\r\n\r\n", "ef");
    r = once("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=16-20\r\n\r\n");
    ck_assert_int_eq(r.status, 416);
    ck_assert_str_eq(hdr(&r, "content-range", v, sizeof v), "bytes */16");
    resp_free(&r);
    /* A suffix of an empty file is all of it: 200, not 416. */
    ck_assert_int_eq(status_of("GET /static/empty.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=-5\r\n\r\n"), 200);
    /* Several ranges or bad syntax: the whole file. */
    ck_assert_int_eq(status_of("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1,4-5\r\n\r\n"), 200);
    ck_assert_int_eq(status_of("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=5-2\r\n\r\n"), 200);
    /* Conditional: not modified since its own Last-Modified. */
    r = once(GET("/static/a.txt"));
    char lm[64], req[256];
    ck_assert_ptr_nonnull(hdr(&r, "last-modified", lm, sizeof lm));
    resp_free(&r);
    snprintf(req, sizeof req, "GET /static/a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n",
             lm);
    client_t *c = client_open(&S.addr);
    roundtrip(c, req, &r);
    ck_assert_int_eq(r.status, 304);
    ck_assert_ptr_null(hdr(&r, "content-length", v, sizeof v));
    resp_free(&r);
    roundtrip(c, "GET /static/a.txt HTTP/1.1\r\nHost: t\r\n"
                 "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200); /* modified since 1994 */
    resp_free(&r);
    roundtrip(c, "GET /static/a.txt HTTP/1.1\r\nHost: t\r\n"
                 "If-Modified-Since: Friday, 31-Dec-99 23:59:59 GMT\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200); /* obsolete form, parsed */
    resp_free(&r);
    char now[64];
    time_t t = time(NULL);
    struct tm tm;
    strftime(now, sizeof now, "%a %b %e %H:%M:%S %Y", gmtime_r(&t, &tm));
    snprintf(req, sizeof req, "GET /static/a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: %s\r\n\r\n",
             now);
    roundtrip(c, req, &r);
    ck_assert_int_eq(r.status, 304); /* asctime form, now */
    resp_free(&r);
    roundtrip(c, "GET /static/a.txt HTTP/1.1\r\nHost: t\r\n"
                 "If-Modified-Since: Fri, 31 Dec 2100 23:59:59 GMT\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200); /* a date in the future is ignored */
    resp_free(&r);
    roundtrip(c, "GET /static/a.txt HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: garbage\r\n\r\n",
              &r);
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    client_close(c);
}
END_TEST

START_TEST(static_out_of_fds_is_503)
{
    /* With no fd number left (the limit lowered to just above the highest
     * fd in use), opening the file fails with EMFILE: the server's
     * trouble (503), not a forbidden file (403). The connection is open
     * before, and the limit comes back after. */
    client_t *c = client_open(&S.addr);
    resp_t r;
    roundtrip(c, GET("/hello"), &r);
    resp_free(&r);
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    /* A number below the limit can come free between the measure and the
     * open (seen once in 15 runs beside other test loops: an fd some thread
     * held for a moment); then the file opens (200) and we measure again.
     * A few tries; any status but 200 or 503 fails at once. */
    int status = 200;
    for (int try = 0; try < 5 && status == 200; try++) {
        int top = dup(0); /* the lowest free number: nothing above is needed */
        ck_assert_int_ge(top, 0);
        close(top);
        struct rlimit low = {(rlim_t)top, old.rlim_max};
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        roundtrip(c, GET("/static/a.txt"), &r);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        status = r.status;
        resp_free(&r);
    }
    ck_assert_int_eq(status, 503);
    client_close(c);
    ck_assert_int_eq(status_of(GET("/static/a.txt")), 200);
}
END_TEST

START_TEST(static_if_range_and_huge_ranges)
{
    char lm[64], req[256], v[64];
    resp_t r = once(GET("/static/a.txt"));
    ck_assert_ptr_nonnull(hdr(&r, "last-modified", lm, sizeof lm));
    resp_free(&r);
    /* If-Range with our validator: the range; with another: the whole file. */
    snprintf(req, sizeof req,
             "GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\nIf-Range: %s\r\n\r\n", lm);
    r = once(req);
    ck_assert_int_eq(r.status, 206);
    ck_assert_str_eq(body_str(&r), "01");
    resp_free(&r);
    const char *other[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "\"some-etag\"", "garbage"};
    for (int i = 0; i < 3; i++) {
        snprintf(req, sizeof req,
                 "GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\nIf-Range: %s\r\n\r\n",
                 other[i]);
        r = once(req);
        ck_assert_msg(r.status == 200, "If-Range %s: %d", other[i], r.status);
        ck_assert_str_eq(body_str(&r), "0123456789abcdef");
        resp_free(&r);
    }
    /* Positions past 2^64: a first byte beyond the file is unsatisfiable,
     * a last one means "to the end". */
    r = once("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=18446744073709551616-\r\n\r\n");
    ck_assert_int_eq(r.status, 416);
    ck_assert_str_eq(hdr(&r, "content-range", v, sizeof v), "bytes */16");
    resp_free(&r);
    ck_assert_int_eq(status_of("GET /static/a.txt HTTP/1.1\r\nHost: t\r\n"
                               "Range: bytes=99999999999999999999999-\r\n\r\n"), 416);
    check_body("GET /static/a.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=10-99999999999999999999999\r\n\r\n",
               "abcdef");
}
END_TEST

START_TEST(static_redirect_location_encoded)
{
    struct {
        const char *get, *location, *body;
    } cases[] = {
        {"/static/100%25", "/static/100%25/", "100%"},
        {"/static/q%3Fx", "/static/q%3Fx/", "q?x"},
        {"/static/a%20b", "/static/a%20b/", "a b"},
        {"/static/sub?q=1&r=%20", "/static/sub/?q=1&r=%20", "sub index"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[256], v[128];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", cases[i].get);
        resp_t r = once(req);
        ck_assert_int_eq(r.status, 301);
        ck_assert_str_eq(hdr(&r, "location", v, sizeof v), cases[i].location);
        resp_free(&r);
        /* Following it reaches the directory's index. */
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", cases[i].location);
        check_body(req, cases[i].body);
    }
}
END_TEST

/* A client that asks for a big file and stops reading is dropped at the
 * send timeout: the file's sendfile waits with it, as every other send. */
START_TEST(static_send_timeout_drops_a_stalled_reader)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    ck_assert_int_eq(connect(fd, (const struct sockaddr *)&S.addr.ss, S.addr.len), 0);
    const char *rq = "GET /static/big.bin HTTP/1.1\r\nHost: t\r\n\r\n";
    ck_assert_int_eq(send(fd, rq, strlen(rq), 0), (ssize_t)strlen(rq));
    /* No event says "the server gave up": its count of open connections
     * is looked at every 10 ms, for at most 10 s (the timeout is 200 ms). */
    sp_http_server_stats_t st = {.active = 1};
    for (int i = 0; i < 1000 && st.active; i++) {
        struct timespec tick = {0, 10000000};
        nanosleep(&tick, NULL);
        sp_http_server_stats(S.http, &st);
    }
    ck_assert_uint_eq(st.active, 0);
    close(fd);
}
END_TEST

static void setup_send_timeout(void)
{
    server_start(&(sp_http_server_opts_t){.send_timeout_us = 200000});
}

int main(void)
{
    Suite *s = http_suite("http_static");
    ADD_CASE(s, "static", setup_default, server_stop, static_files_served,
             static_big_file_sendfile, static_no_escape_from_root,
             static_ranges_and_conditional, static_if_range_and_huge_ranges,
             static_out_of_fds_is_503, static_redirect_location_encoded);
    ADD_CASE(s, "send_timeout", setup_send_timeout, server_stop,
             static_send_timeout_drops_a_stalled_reader);
    return sp_test_run(s);
}
