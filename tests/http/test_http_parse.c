/* HTTP server, request parsing: fields and header lookup, requests split at
 * every byte, chunked bodies, malformed input (400), the same verdict however
 * TCP splits the bytes, smuggling framings, Host checks, the 414/431/413
 * limits and a server that takes no bodies. Raw sockets on 127.0.0.1. */
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

START_TEST(request_fields_decoded)
{
    resp_t r = once("POST /echo?a=1&b=x+y%21&flag&=v&c=%7e HTTP/1.1\r\nHost: t\r\n"
                    "x-TEST:   spaced value  \r\nContent-Length: 5\r\n\r\nhello");
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(body_str(&r),
                     "method=POST\ntarget=/echo?a=1&b=x+y%21&flag&=v&c=%7e\npath=/echo\n"
                     "query=a=1&b=x+y%21&flag&=v&c=%7e\nx-test=spaced value\nversion=11\n"
                     "nparams=5\nbody=5:hello\nparam a=1\nparam b=x y!\nparam flag=\n"
                     "param =v\nparam c=~");
    resp_free(&r);
    r = once("GET /ec%68o/../x%20y HTTP/1.1\r\nHost: t\r\n\r\n");
    ck_assert_int_eq(r.status, 404); /* decoded path "/echo/../x y" is no route */
    resp_free(&r);
    r = once("GET http://example.com/echo?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    ck_assert_int_eq(r.status, 200); /* absolute form */
    ck_assert_ptr_nonnull(strstr(body_str(&r), "path=/echo\nquery=q=1\n"));
    resp_free(&r);
    /* A plain target is its own path; the last header's blanks go too. */
    r = once("GET /echo HTTP/1.1\r\nHost: t\r\nX-Test: last \t \r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(body_str(&r), "target=/echo\npath=/echo\nquery=\nx-test=last\n"));
    resp_free(&r);
}
END_TEST

/* Headers and parameters through the accessors, case-insensitively. */
static int h_lookup(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    const char *a = sp_http_request_header(req, "ACCEPT");
    const char *b = sp_http_request_header(req, "x-Missing");
    const char *p = sp_http_request_param(req, "k");
    const char *name, *value;
    ck_assert_int_eq(sp_http_request_header_at(req, 0, &name, &value), 0);
    ck_assert_int_eq(sp_http_request_header_at(req, 99, &name, &value), -ERANGE);
    ck_assert_int_eq(sp_http_request_param_at(req, 9, &name, &value), -ERANGE);
    char text[128];
    int n = snprintf(text, sizeof text, "%s|%s|%s|%zu|%s", a, b ? b : "null", p ? p : "null",
                     sp_http_request_nheaders(req), sp_http_request_param(req, "zz") ? "?" : "-");
    return sp_http_response_set_body(res, text, (size_t)n);
}

START_TEST(header_lookup_case_insensitive)
{
    sp_http_router_add(S.router, SP_HTTP_EXACT, "/lookup", SP_HTTP_M_GET, h_lookup, NULL);
    resp_t r = once("GET /lookup?k=v&k=w HTTP/1.1\r\nhost: t\r\naccept: text/x\r\n\r\n");
    ck_assert_str_eq(body_str(&r), "text/x|null|v|2|-");
    resp_free(&r);
}
END_TEST

/* A request split at every byte boundary still parses. */
START_TEST(request_split_into_single_bytes)
{
    const char *req = "POST /echo?s=1 HTTP/1.1\r\nHost: t\r\nX-Test: slow\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    client_t *c = client_open(&S.addr);
    for (const char *p = req; *p; p++)
        ck_assert_int_eq(write(c->fd, p, 1), 1);
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_ptr_nonnull(strstr(body_str(&r), "x-test=slow"));
    ck_assert_ptr_nonnull(strstr(r.body, "body=5:abcde"));
    resp_free(&r);
    client_close(c);
}
END_TEST

START_TEST(chunked_request_body)
{
    resp_t r = once("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n");
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(body_str(&r), "body=11:hello world"));
    resp_free(&r);
}
END_TEST

START_TEST(malformed_requests_400)
{
    refused("GARBAGE\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n", 400);
    refused("GET / HTTP/1.1\r\nHost: t\r\nNa me: v\r\n\r\n", 400);
    refused("GET / HTTP/9.1\r\nHost: t\r\n\r\n", 505);
    refused("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n", 400);   /* bad escape */
    refused("GET /a%00b HTTP/1.1\r\nHost: t\r\n\r\n", 400);  /* NUL */
    refused("GET /a?x=%g0 HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\n\r\n", 400);              /* no Host */
    refused("GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    static const char nul[] = "GET /he\0llo HTTP/1.1\r\nHost: t\r\n\r\n";
    expect_refused(nul, sizeof nul - 1, 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400);
    refused("FOO /hello HTTP/1.1\r\nHost: t\r\n\r\n", 501); /* well formed, unknown */
    static const char tls_hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
    expect_refused(tls_hello, sizeof tls_hello - 1, 400);
    refused("GET /a\tb HTTP/1.1\r\nHost: t\r\n\r\n", 400); /* control bytes in the target */
    refused("GET /a\x7f HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    refused("GET /a\x0c HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    /* Obsolete line folding, on any header, also after an empty first
     * line (a folded length would swallow the next request). */
    refused("GET /hello HTTP/1.1\r\nHost: t\r\nX-A: a\r\n b\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\tx\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:\r\n 40\r\n\r\n"
            "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding:\r\n chunked\r\n\r\n"
            "0\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost:\r\n evil\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: t\r\nX-A:\r\n \r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\n Host: t\r\n\r\n", 400);
    /* A bare LF ends no line. */
    refused("GET /hello HTTP/1.1\nHost: t\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: t\n\r\n", 400);
}
END_TEST

/* The same bytes get the same answer however TCP splits them: whole, in
 * single bytes, and in writes cut at a chosen place. */
START_TEST(verdict_independent_of_segmentation)
{
    static const struct {
        const char *req;
        size_t split; /* a third way: writes of this many bytes */
        int status;
    } cases[] = {
        /* A bare LF before a Transfer-Encoding line, then a pipelined
         * request the chunked body must not swallow or reveal. */
        {"POST /echo HTTP/1.1\r\nHost: t\r\nX-A: 1\nTransfer-Encoding: chunked\r\n\r\n"
         "0\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n", 40, 400},
        {"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length:\r\n 40\r\n\r\n"
         "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", 43, 400},
        {"GE /hello HTTP/1.1\r\nHost: t\r\n\r\n", 2, 501}, /* a known method's prefix */
        {"GETX /hello HTTP/1.1\r\nHost: t\r\n\r\n", 3, 501},
        {"GET\x01 /hello HTTP/1.1\r\nHost: t\r\n\r\n", 3, 400},
        {"GET /hello HTTP/2.0\r\nHost: t\r\n\r\n", 15, 505},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].req);
        expect_refused_in_pieces(cases[i].req, len, len, cases[i].status);
        expect_refused_in_pieces(cases[i].req, len, 1, cases[i].status);
        expect_refused_in_pieces(cases[i].req, len, cases[i].split, cases[i].status);
    }
}
END_TEST

START_TEST(smuggling_framing_400)
{
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
            "Content-Length: 3\r\n\r\n0\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
            "Content-Length: 3\r\n\r\nabc", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
            "Content-Length: 5\r\n\r\nabcde", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: +3\r\n\r\nabc", 400);
    /* Line ends that are not CRLF where http-parser (built without strict
     * checks) would take any byte: after chunk data, in a chunk-size line,
     * after the last chunk, and at the end of the headers. Each could hide
     * a second request from a proxy that reads the bytes correctly. */
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\nhelloAB0\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\r\nhello\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5\rZhello\r\n0\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0\rZ\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: t\r\n\rZGET /hello HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: t\rX-A: b\r\n\r\n", 400);
    /* A bare LF in chunked framing (a proxy ends the size line there;
     * http-parser reads on as extension text). */
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5;a=b\nhello\r\n0\r\n\r\n\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0;a=b\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    /* HTTP/1.0 has no chunked coding (RFC 9112 6.1). */
    refused("POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
            "0\r\n\r\n", 400);
}
END_TEST

START_TEST(host_value_checked)
{
    refused("GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: a/b\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: a@b\r\n\r\n", 400);
    ck_assert_int_eq(status_of("GET /hello HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), 200);
    ck_assert_int_eq(status_of("GET /hello HTTP/1.1\r\nHost: my-host.example:80\r\n\r\n"), 200);
    ck_assert_int_eq(status_of("GET /hello HTTP/1.1\r\nHost:\r\n\r\n"), 200); /* empty: allowed */
    ck_assert_int_eq(status_of("GET /hello HTTP/1.1\r\nHost: aZ09-._~!$&'()*+,;=%:[] \t\r\n"
                               "\r\n"), 200); /* every allowed byte, trailing blanks trimmed */
    refused("GET /hello HTTP/1.1\r\nHost: a\"b\r\n\r\n", 400);
    refused("GET /hello HTTP/1.1\r\nHost: a\x80" "b\r\n\r\n", 400);
}
END_TEST

/* A bad byte anywhere in a header name or a Host value, whatever their
 * lengths (the checks read four bytes a step, the last step overlapping
 * the one before). */
START_TEST(bad_byte_at_every_position)
{
    char req[160], name[24], host[24];
    for (size_t n = 1; n < 20; n++)
        for (size_t bad = 0; bad <= n; bad++) {
            memset(name, 'n', n);
            memset(host, 'h', n);
            name[n] = host[n] = '\0';
            if (bad < n) {
                name[bad] = ' ';
                host[bad] = '/';
            }
            int want = bad < n ? 400 : 200;
            snprintf(req, sizeof req, "GET /hello HTTP/1.1\r\nHost: t\r\n%s: v\r\n\r\n", name);
            ck_assert_int_eq(status_of(req), want);
            snprintf(req, sizeof req, "GET /hello HTTP/1.1\r\nHost: %s\r\n\r\n", host);
            ck_assert_int_eq(status_of(req), want);
        }
}
END_TEST

/* A bare CR or LF in a header value, wherever it falls in the head (the
 * check reads it eight bytes at a time, then the tail byte by byte). */
START_TEST(line_ends_checked_at_every_offset)
{
    char req[128];
    for (int n = 0; n < 17; n++) {
        const char *pad = &"aaaaaaaaaaaaaaaa"[16 - n];
        snprintf(req, sizeof req, "GET /hello HTTP/1.1\r\nHost: t\r\nX-A: %s\nB: c\r\n\r\n", pad);
        refused(req, 400);
        snprintf(req, sizeof req, "GET /hello HTTP/1.1\r\nHost: t\r\nX-A: %s\rB: c\r\n\r\n", pad);
        refused(req, 400);
        snprintf(req, sizeof req, "GET /hello HTTP/1.1\r\nHost: t\r\nX-A: %s\r\nB: c\r\n\r\n", pad);
        ck_assert_int_eq(status_of(req), 200);
    }
}
END_TEST

START_TEST(head_errors_have_no_body)
{
    const char *reqs[] = {"HEAD /a%zz HTTP/1.1\r\nHost: t\r\n\r\n",
                          "HEAD /static/a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999\r\n\r\n"};
    int want[] = {400, 413};
    for (int i = 0; i < 2; i++) {
        client_t *c = client_open(&S.addr);
        send_str(c, reqs[i]);
        resp_t r;
        ck_assert_int_eq(get_response(c, &r, true), 0);
        ck_assert_int_eq(r.status, want[i]);
        /* Nothing after the head (read with it, or later): then the close. */
        ck_assert_uint_eq(c->len, 0);
        ck_assert_int_eq(fill(c), 0);
        resp_free(&r);
        client_close(c);
    }
}
END_TEST

START_TEST(limits_414_431_413)
{
    char *big = repeat('a', 9000);
    char *req = malloc(20000);
    sprintf(req, "GET /%s HTTP/1.1\r\nHost: t\r\n\r\n", big);
    refused(req, 414);
    /* Just under the limit is fine (404: no such route). */
    sprintf(req, "GET /%.*s HTTP/1.1\r\nHost: t\r\n\r\n", 8000, big);
    ck_assert_int_eq(status_of(req), 404);
    /* 17 KiB of headers in one line, and in many. */
    char *huge = repeat('h', 17000);
    char *req2 = malloc(40000);
    sprintf(req2, "GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: %s\r\n\r\n", huge);
    refused(req2, 431);
    size_t n = (size_t)sprintf(req2, "GET /hello HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 101; i++)
        n += (size_t)sprintf(req2 + n, "X-%d: v\r\n", i);
    strcpy(req2 + n, "\r\n");
    refused(req2, 431);
    /* Body over 1 MiB: by Content-Length, and chunked as it grows. */
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1048577\r\n\r\n", 413);
    /* A chunk size over the limit is refused at its size line: no byte of
     * it is sent (a server that waited would answer 408 much later). */
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "7FFFFFFFFFFFFFFF\r\n", 413);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "10\r\n0123456789abcdef\r\n100000\r\n", 413);
    char *chunk = repeat('c', 0x10000);
    n = (size_t)sprintf(req2, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    client_t *c = client_open(&S.addr);
    send_str(c, req2);
    resp_t r;
    for (int i = 0; i < 17; i++) {
        char head[16];
        sprintf(head, "10000\r\n");
        if (write(c->fd, head, strlen(head)) < 0 || sp_write_full(c->fd, chunk, 0x10000) < 0 ||
            write(c->fd, "\r\n", 2) < 0)
            break; /* the server answered and closed already */
    }
    shutdown(c->fd, SHUT_WR);
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 413);
    resp_free(&r);
    client_close(c);
    /* Exactly 1 MiB is accepted. */
    char *mib = repeat('m', 1 << 20);
    sprintf(req2, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", 1 << 20);
    c = client_open(&S.addr);
    send_str(c, req2);
    ck_assert_int_eq(sp_write_full(c->fd, mib, 1 << 20), 1 << 20);
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(body_str(&r), "body=1048576:mmm"));
    resp_free(&r);
    client_close(c);
    free(mib);
    free(chunk);
    free(big);
    free(req);
    free(huge);
    free(req2);
}
END_TEST

static void setup_no_body(void)
{
    sp_http_server_opts_t o = {.no_body = true, .max_body = 1000};
    server_start(&o);
}

START_TEST(no_body_refuses_every_body)
{
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx", 413);
    refused("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            "1\r\nx\r\n0\r\n\r\n",
            413);
    ck_assert_int_eq(status_of("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"),
                     200);
    ck_assert_int_eq(status_of("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked"
                               "\r\n\r\n0\r\n\r\n"),
                     200);
    ck_assert_int_eq(status_of(GET("/hello")), 200);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("http_parse");
    ADD_CASE(s, "parse", setup_default, server_stop, request_fields_decoded,
             header_lookup_case_insensitive, request_split_into_single_bytes,
             chunked_request_body, malformed_requests_400, verdict_independent_of_segmentation,
             smuggling_framing_400, host_value_checked, bad_byte_at_every_position,
             line_ends_checked_at_every_offset,
             head_errors_have_no_body,
             limits_414_431_413);
    ADD_CASE(s, "no_body", setup_no_body, server_stop, no_body_refuses_every_body);
    return sp_test_run(s);
}
