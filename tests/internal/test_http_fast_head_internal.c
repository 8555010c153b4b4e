/* The common request head read without http-parser (http/http_fast_head.c)
 * against http-parser alone (sp__http_req_parse) on the same bytes: every
 * request, refusal and connection fate must be the same. Hand-made heads
 * say which the fast path takes and which it leaves to http-parser; heads
 * generated and mutated from a fixed seed cover the bytes between. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_internal.h"
#include "testutil.h"

typedef size_t feed_fn(sp_http_request_t *, const char *, size_t, sp__http_state_t *);

static const sp_http_server_opts_t defaults = {
    .max_request_line = SP_HTTP_DEFAULT_MAX_REQUEST_LINE,
    .max_header_size = SP_HTTP_DEFAULT_MAX_HEADER_SIZE,
    .max_headers = SP_HTTP_DEFAULT_MAX_HEADERS,
    .max_body = SP_HTTP_DEFAULT_MAX_BODY,
};
/* Small limits, reached by the generated heads. */
static const sp_http_server_opts_t small = {
    .max_request_line = 24,
    .max_header_size = 96,
    .max_headers = 4,
    .max_body = 64,
};

static void put(char **at, char *end, const char *s)
{
    size_t n = strlen(s), room = (size_t)(end - *at) - 1;
    n = n < room ? n : room;
    memcpy(*at, s, n);
    *at += n;
    **at = '\0';
}

/* Everything a handler and the connection see of the requests in
 * data[0, n), fed whole: each request's method, target, path, query,
 * parameters, headers, version, keep-alive, upgrade and 100-continue, or
 * the status that refused one, and where each ended. */
static void answers(const char *data, size_t n, const sp_http_server_opts_t *opts,
                    feed_fn *feed, char *out, size_t cap)
{
    char *at = out, *end = out + cap;
    *at = '\0';
    sp_http_request_t r;
    sp__http_req_init(&r, opts);
    size_t off = 0;
    char line[160];
    for (int k = 0; k < 8 && off < n; k++) {
        sp__http_state_t st;
        size_t used = feed(&r, data + off, n - off, &st);
        off += used;
        if (st == SP__HTTP_MORE) {
            put(&at, end, "| unfinished");
            break;
        }
        if (st == SP__HTTP_FAILED) {
            snprintf(line, sizeof line, "| status %d", r.error);
            put(&at, end, line);
            break;
        }
        snprintf(line, sizeof line, "| @%zu %s v%d ka%d up%d ex%d ", off,
                 sp_http_request_method_name(&r), sp_http_request_version(&r), r.keep_alive,
                 r.upgrade, r.expect_continue);
        put(&at, end, line);
        put(&at, end, sp_http_request_target(&r));
        put(&at, end, " path=");
        put(&at, end, sp_http_request_path(&r));
        put(&at, end, " query=");
        put(&at, end, sp_http_request_query(&r));
        const char *name, *value;
        for (size_t i = 0; sp_http_request_param_at(&r, i, &name, &value) == 0; i++) {
            put(&at, end, " p:");
            put(&at, end, name);
            put(&at, end, "=");
            put(&at, end, value);
        }
        for (size_t i = 0; sp_http_request_header_at(&r, i, &name, &value) == 0; i++) {
            put(&at, end, " h:");
            put(&at, end, name);
            put(&at, end, "=");
            put(&at, end, value);
        }
        if (!r.keep_alive || r.upgrade)
            break;
        sp__http_req_reset(&r);
    }
    sp__http_req_free(&r);
}

static void escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fputc('\n', stderr);
}

/* Whether the fast path took the first request of data. */
static bool fast_takes(const char *data, size_t n, const sp_http_server_opts_t *opts)
{
    sp_http_request_t r;
    sp__http_req_init(&r, opts);
    sp__http_state_t st;
    bool took = sp__http_fast_head(&r, data, n, &st) > 0;
    sp__http_req_free(&r);
    return took;
}

/* The feed (fast path first) and http-parser alone agree on data. */
static bool same_answers(const char *data, size_t n, const sp_http_server_opts_t *opts)
{
    static char a[8192], b[8192];
    answers(data, n, opts, sp__http_req_feed, a, sizeof a);
    answers(data, n, opts, sp__http_req_parse, b, sizeof b);
    if (!strcmp(a, b))
        return true;
    fprintf(stderr, "input: ");
    escaped(data, n);
    fprintf(stderr, "fast path:   %s\nhttp-parser: %s\n", a, b);
    return false;
}

typedef struct {
    const char *head;
    bool fast; /* the fast path takes it (with the default limits) */
} head_case_t;

static const head_case_t heads[] = {
    {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
    {"GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\nAccept: */*\r\n\r\n", true},
    {"HEAD /x?a=1&b=%41 HTTP/1.1\r\nHost: a\r\n\r\n", true},
    {"GET /a%2Fb/../c?x=y+z#frag HTTP/1.1\r\nHost: a\r\n\r\n", true},
    {"GET / HTTP/1.0\r\n\r\n", true},
    {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nconnection: Keep-Alive\r\nConnection: close\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", true},
    {"GET / HTTP/1.0\r\nExpect: 100-Continue  \r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Blank: \t \r\nX-Tab: a\tb \t\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-High: caf\xc3\xa9\r\n\r\n", true},
    {"GET / HTTP/1.1\r\nhost: a\r\nHOST: b\r\n\r\n", true},      /* 400: two */
    {"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", true},              /* 400: a space */
    {"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", true},            /* 400: no Host */
    {"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", true},             /* the target's verdict */
    {"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\nPOST / HTTP/1.1\r\n"
     "Host: c\r\nContent-Length: 3\r\n\r\nabc",
     true},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, TE\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n", false},
    /* http-parser 2.9 takes this name as Transfer-Encoding (400) */
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encodingg: x\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length-X: 1\r\n\r\n", false},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi", false},
    {"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", false},
    {"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", false},
    {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", false},
    {"GET / HTTP/1.1\nHost: a\n\n", false},
    {"GET / HTTP/1.1\r\nHost: a\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", false}, /* folding */
    {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: \x7f\r\n\r\n", false},
    {"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", false},
    {"GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", false},
    {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", false},
    {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", false},
    {"GET / HTTP/1.1\r\nHost: a\r\n", false}, /* not complete yet */
    {"GET / HTTP/1.1\r\nHo", false},
    {"get / HTTP/1.1\r\nHost: a\r\n\r\n", false},
};

START_TEST(hand_made_heads_agree_and_take_the_expected_path)
{
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        const char *h = heads[i].head;
        ck_assert_msg(same_answers(h, strlen(h), &defaults), "case %zu", i);
        ck_assert_msg(fast_takes(h, strlen(h), &defaults) == heads[i].fast,
                      "case %zu: fast path %s it", i, heads[i].fast ? "declined" : "took");
    }
}
END_TEST

/* The limits: a target, a header block or a header count one past its
 * limit is refused with http-parser's status, at the limit it is served. */
START_TEST(limits_agree_at_their_edges)
{
    char buf[512];
    int taken = 0;
    for (int tl = 18; tl <= 30; tl++) { /* max_request_line 24 */
        snprintf(buf, sizeof buf, "GET /%.*s HTTP/1.1\r\nHost: a\r\n\r\n", tl - 1,
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        ck_assert(same_answers(buf, strlen(buf), &small));
        taken += fast_takes(buf, strlen(buf), &small);
    }
    for (int vl = 60; vl <= 90; vl++) { /* max_header_size 96 */
        snprintf(buf, sizeof buf, "GET / HTTP/1.1\r\nHost: a\r\nX-V: %.*s  \r\n\r\n", vl,
                 "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"
                 "vvvvvvvvvvvvvvvvvvvvvvvvv");
        ck_assert(same_answers(buf, strlen(buf), &small));
        taken += fast_takes(buf, strlen(buf), &small);
    }
    for (int nh = 1; nh <= 7; nh++) { /* max_headers 4 */
        char *at = buf + sprintf(buf, "GET / HTTP/1.1\r\nHost: a\r\n");
        for (int i = 1; i < nh; i++)
            at += sprintf(at, "X%d: %d\r\n", i, i);
        strcpy(at, "\r\n");
        ck_assert(same_answers(buf, strlen(buf), &small));
        taken += fast_takes(buf, strlen(buf), &small);
    }
    ck_assert_int_gt(taken, 10); /* the fast path met the edges too */
}
END_TEST

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *const names[] = {"Host", "host", "HOST", "Accept", "Connection",
                                    "Expect", "Content-Length", "Transfer-Encoding",
                                    "Upgrade", "Proxy-Connection", "X-A", "Cookie", "X_Y",
                                    "Hos", "Hostt", "Connectio"};
static const char *const values[] = {"a", "localhost:8080", "close", "keep-alive",
                                     "Keep-Alive", "upgrade", "100-continue", "5", "chunked",
                                     "", " ", "a b", "[::1]:80", "x\ty", "caf\xc3\xa9", "*/*",
                                     "close, keep-alive", "a,b"};
static const char *const targets[] = {"/", "/plaintext", "/a/b?c=d&e", "/%41%zz", "/a#b",
                                      "/?", "/a+b?x=%20", "*", "http://h/", "/a\"<>{}|^`"};

/* A head made of common pieces, then mutated: a byte changed, dropped or
 * doubled, so that most heads are near the fast path's edge. */
static size_t generate(char *buf, size_t cap)
{
    char *at = buf, *end = buf + cap;
    static const char *const lines[] = {"GET ", "HEAD ", "GET ", "POST ", "get "};
    put(&at, end, lines[rnd(5)]);
    put(&at, end, targets[rnd(10)]);
    static const char *const versions[] = {" HTTP/1.1\r\n", " HTTP/1.0\r\n", " HTTP/1.1\r\n",
                                           " HTTP/2.0\r\n", " HTTP/1.1\n"};
    put(&at, end, versions[rnd(5)]);
    unsigned nh = rnd(6);
    for (unsigned i = 0; i < nh; i++) {
        put(&at, end, names[rnd(16)]);
        put(&at, end, rnd(8) ? ": " : ":");
        put(&at, end, values[rnd(18)]);
        put(&at, end, rnd(6) ? "\r\n" : " \r\n");
    }
    put(&at, end, "\r\n");
    if (rnd(3) == 0)
        put(&at, end, "GET /next HTTP/1.1\r\nHost: n\r\n\r\n");
    size_t n = (size_t)(at - buf);
    for (unsigned m = rnd(2) ? rnd(3) : 0; m > 0 && n > 1; m--) {
        size_t i = rnd((unsigned)n);
        switch (rnd(3)) {
        case 0: buf[i] = (char)rnd(256); break;
        case 1: memmove(buf + i, buf + i + 1, n - i - 1); n--; break;
        default:
            if (n + 1 < cap) {
                memmove(buf + i + 1, buf + i, n - i);
                n++;
            }
        }
    }
    return n;
}

START_TEST(generated_heads_agree)
{
    char buf[1024];
    int taken = 0, rounds = 300000;
    for (int i = 0; i < rounds; i++) {
        size_t n = generate(buf, sizeof buf);
        const sp_http_server_opts_t *opts = i & 1 ? &small : &defaults;
        ck_assert_msg(same_answers(buf, n, opts), "round %d", i);
        taken += fast_takes(buf, n, opts);
    }
    /* Not vacuous: a good share went the fast way. */
    ck_assert_int_gt(taken, rounds / 10);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_fast_head_internal");
    SP_TEST_CASE(s, "fast_head", 60, NULL, NULL, hand_made_heads_agree_and_take_the_expected_path,
                 limits_agree_at_their_edges, generated_heads_agree);
    return sp_test_run(s);
}
