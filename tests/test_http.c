/* HTTP server: an in-process server on 127.0.0.1 talked to with raw
 * sockets (exact bytes, pipelining, bad input, timeouts), 1,000 client
 * fibers, and the spindle-httpd program with curl and python3 http.client.
 * Every client read is bounded by SO_RCVTIMEO. */
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

#include "testutil.h"

/* ---- a tiny HTTP client on a blocking socket ---------------------------- */

typedef struct client {
    int fd;
    char buf[1 << 16];
    size_t len;
} client_t;

typedef struct resp {
    int status;
    char head[16384]; /* header lines, NUL-terminated */
    char *body;
    size_t body_len;
} resp_t;

static client_t *client_open(const sp_addr_t *a)
{
    client_t *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(c->fd, 0);
    struct timeval tv = {10, 0}; /* no test waits forever */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert_int_eq(connect(c->fd, (const struct sockaddr *)&a->ss, a->len), 0);
    return c;
}

static void client_close(client_t *c)
{
    close(c->fd);
    free(c);
}

static void send_str(client_t *c, const char *s)
{
    ck_assert_int_eq(sp_write_full(c->fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* More bytes into the buffer: the count, 0 at EOF, -1 on error/timeout. */
static ssize_t fill(client_t *c)
{
    if (c->len == sizeof c->buf)
        return -1;
    ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
    if (n > 0)
        c->len += (size_t)n;
    return n;
}

static void consume(client_t *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

/* Exactly n bytes into dst. */
static int take(client_t *c, char *dst, size_t n)
{
    size_t got = 0;
    while (got < n) {
        if (!c->len && fill(c) <= 0)
            return -1;
        size_t k = c->len < n - got ? c->len : n - got;
        memcpy(dst + got, c->buf, k);
        consume(c, k);
        got += k;
    }
    return 0;
}

static int take_line(client_t *c, char *line, size_t size)
{
    char *eol;
    while (!(eol = memmem(c->buf, c->len, "\r\n", 2)))
        if (fill(c) <= 0)
            return -1;
    size_t n = (size_t)(eol - c->buf);
    if (n >= size)
        return -1;
    memcpy(line, c->buf, n);
    line[n] = '\0';
    consume(c, n + 2);
    return 0;
}

/* The value of a response header (first match), or NULL. */
static const char *hdr(const resp_t *r, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (!strncasecmp(line, name, n) && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            const char *end = strstr(v, "\r\n");
            size_t len = (size_t)(end - v) < size - 1 ? (size_t)(end - v) : size - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return out;
        }
    }
    return NULL;
}

static int read_chunked(client_t *c, resp_t *r)
{
    char line[128];
    size_t cap = 0;
    for (;;) {
        if (take_line(c, line, sizeof line) < 0)
            return -1;
        size_t n = strtoul(line, NULL, 16);
        if (n == 0)
            break;
        if (r->body_len + n + 1 > cap) {
            cap = (r->body_len + n + 1) * 2;
            r->body = realloc(r->body, cap);
        }
        if (take(c, r->body + r->body_len, n) < 0 || take_line(c, line, sizeof line) < 0)
            return -1;
        r->body_len += n;
    }
    do /* trailers up to the blank line */
        if (take_line(c, line, sizeof line) < 0)
            return -1;
    while (line[0]);
    return 0;
}

static int read_to_eof(client_t *c, resp_t *r)
{
    while (fill(c) > 0)
        ;
    r->body = malloc(c->len + 1);
    memcpy(r->body, c->buf, c->len);
    r->body_len = c->len;
    c->len = 0;
    return 0;
}

/* One response. 0, or -1 on EOF/timeout/garbage. head_only: a HEAD answer. */
static int get_response(client_t *c, resp_t *r, bool head_only)
{
    memset(r, 0, sizeof *r);
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
        if (fill(c) <= 0)
            return -1;
    size_t n = (size_t)(end - c->buf) + 4;
    ck_assert_uint_lt(n, sizeof r->head);
    memcpy(r->head, c->buf, n);
    r->head[n] = '\0';
    consume(c, n);
    if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1)
        return -1;
    char v[64];
    if (head_only || r->status < 200 || r->status == 204 || r->status == 304)
        return 0;
    if (hdr(r, "transfer-encoding", v, sizeof v))
        return strcasecmp(v, "chunked") ? -1 : read_chunked(c, r);
    if (!hdr(r, "content-length", v, sizeof v))
        return read_to_eof(c, r);
    r->body_len = strtoul(v, NULL, 10);
    r->body = malloc(r->body_len + 1);
    return take(c, r->body, r->body_len);
}

static void resp_free(resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

/* The body as a string (for short text bodies). */
static const char *body_str(resp_t *r)
{
    r->body = realloc(r->body, r->body_len + 1);
    r->body[r->body_len] = '\0';
    return r->body;
}

/* Send a request, read the answer. */
static void roundtrip(client_t *c, const char *req, resp_t *r)
{
    send_str(c, req);
    ck_assert_int_eq(get_response(c, r, !strncmp(req, "HEAD", 4)), 0);
}

/* The server closed the connection: EOF with no further byte. */
static void assert_closed(client_t *c)
{
    ck_assert_uint_eq(c->len, 0);
    char x;
    ck_assert_int_eq(read(c->fd, &x, 1), 0);
}

/* ---- the in-process server ---------------------------------------------- */

typedef struct server {
    sp_iomanager_t *io;
    sp_http_server_t *http;
    sp_http_router_t *router;
    sp_http_static_t *st;
    sp_addr_t addr;
} server_t;

static server_t S;
static char root_dir[64];

static int h_hello(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    sp_http_response_set_header(res, "Content-Type", "text/plain");
    return sp_http_response_set_body(res, "hello", 5);
}

/* Describes the request it got, one "key=value" line each. */
static int h_echo(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    char line[512];
    const char *v = sp_http_request_header(req, "X-Test");
    size_t blen;
    const char *body = sp_http_request_body(req, &blen);
    int n = snprintf(line, sizeof line,
                     "method=%s\ntarget=%s\npath=%s\nquery=%s\nx-test=%s\nversion=%d\n"
                     "nparams=%zu\nbody=%zu:",
                     sp_http_request_method_name(req), sp_http_request_target(req),
                     sp_http_request_path(req), sp_http_request_query(req), v ? v : "(none)",
                     sp_http_request_version(req), sp_http_request_nparams(req), blen);
    sp_http_response_append(res, line, (size_t)n);
    sp_http_response_append(res, body, blen);
    for (size_t i = 0; i < sp_http_request_nparams(req); i++) {
        const char *name, *value;
        sp_http_request_param_at(req, i, &name, &value);
        n = snprintf(line, sizeof line, "\nparam %s=%s", name, value);
        sp_http_response_append(res, line, (size_t)n);
    }
    return 0;
}

static int h_empty(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)res;
    (void)arg;
    return 0;
}

static int h_nocontent(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    return sp_http_response_set_status(res, 204);
}

/* Three pieces, the middle one pushed out on its own. */
static int h_stream(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    sp_http_response_append(res, "one,", 4);
    if (sp_http_response_write(res, "two,", 4) < 0 || sp_http_response_flush(res) < 0)
        return -EIO;
    return sp_http_response_write(res, "three", 5) < 0 ? -EIO : 0;
}

static int h_fail(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    sp_http_response_set_body(res, "partial", 7);
    return arg ? -EIO : -ENOENT;
}

static int h_fail_late(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    sp_http_response_write(res, "begun", 5);
    return -EIO;
}

/* Says which route answered: arg is its name. */
static int h_named(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    char text[256];
    int n = snprintf(text, sizeof text, "%s %s", (const char *)arg, sp_http_request_path(req));
    return sp_http_response_set_body(res, text, (size_t)n);
}

/* Header rules, then a streamed body of a length fixed in advance. */
static int h_fixed_stream(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    ck_assert_int_eq(sp_http_response_add_header(res, "X-Evil", "a\r\nInjected: 1"), -EINVAL);
    ck_assert_int_eq(sp_http_response_add_header(res, "Bad Name", "v"), -EINVAL);
    ck_assert_int_eq(sp_http_response_add_header(res, "Date", "x"), -EPERM);
    ck_assert_int_eq(sp_http_response_set_header(res, "connection", "x"), -EPERM);
    ck_assert_int_eq(sp_http_response_set_status(res, 99), -EINVAL);
    ck_assert_int_eq(sp_http_response_add_header(res, "X-Twice", "1"), 0);
    ck_assert_int_eq(sp_http_response_set_header(res, "x-twice", "2"), 0);
    ck_assert_int_eq(sp_http_response_set_header(res, "Content-Length", "10"), 0);
    ck_assert_int_eq(sp_http_response_write(res, "01234", 5), 5);
    ck_assert(sp_http_response_started(res));
    ck_assert_int_eq(sp_http_response_add_header(res, "X-Late", "1"), -EALREADY);
    ck_assert_int_eq(sp_http_response_write(res, "56789", 5), 5);
    return 0;
}

static int h_big(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    enum { N = 3 << 20 };
    char *p = malloc(N);
    for (size_t i = 0; i < N; i++)
        p[i] = (char)('a' + i % 26);
    int rc = sp_http_response_set_body(res, p, N);
    free(p);
    return rc;
}

static void write_file(const char *name, const char *text)
{
    char path[512];
    int n = snprintf(path, sizeof path, "%s/%s", root_dir, name);
    ck_assert(n > 0 && (size_t)n < sizeof path);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void remove_root(void)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s-secret'", root_dir, root_dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The static tree: index.html, a.txt, sub/ (index), "100%/", "q?x/" and
 * "a b/" (indexes holding their names), empty.txt, big.bin, link-in ->
 * a.txt, link-out -> /etc/passwd, idx-in/ and idx-out/ (index.html links
 * to ../a.txt and to /etc/passwd), huge.bin (64 MiB, sparse), and a
 * secret next to it. */
static void make_root(void)
{
    snprintf(root_dir, sizeof root_dir, "/tmp/spindle-http-%d", getpid());
    remove_root(); /* one a failed test left, whose pid this process reuses */
    ck_assert_int_eq(mkdir(root_dir, 0755), 0);
    write_file("index.html", "<h1>home</h1>\n");
    write_file("a.txt", "0123456789abcdef");
    write_file("empty.txt", "");
    char path[256];
    snprintf(path, sizeof path, "%s/sub", root_dir);
    mkdir(path, 0755);
    write_file("sub/index.html", "sub index");
    /* Directory names that mean something in a URL once decoded. */
    const char *odd[] = {"100%", "q?x", "a b"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", root_dir, odd[i]);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/index.html", odd[i]);
        write_file(path, odd[i]);
    }
    snprintf(path, sizeof path, "%s/big.bin", root_dir);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < (4 << 20); i++)
        fputc((i * 7 + i / 4096) & 0xff, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/link-in", root_dir);
    ck_assert_int_eq(symlink("a.txt", path), 0);
    snprintf(path, sizeof path, "%s/link-out", root_dir);
    ck_assert_int_eq(symlink("/etc/passwd", path), 0);
    /* 64 MiB of holes: more than any socket buffers hold. */
    snprintf(path, sizeof path, "%s/huge.bin", root_dir);
    int hfd = open(path, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_ge(hfd, 0);
    ck_assert_int_eq(ftruncate(hfd, 64 << 20), 0);
    close(hfd);
    /* Directories whose index is a link: to a file of the root, and out. */
    const char *dirs[][2] = {{"idx-in", "../a.txt"}, {"idx-out", "/etc/passwd"}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", root_dir, dirs[i][0]);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/%s/index.html", root_dir, dirs[i][0]);
        ck_assert_int_eq(symlink(dirs[i][1], path), 0);
    }
    snprintf(path, sizeof path, "%s-secret", root_dir);
    f = fopen(path, "w");
    fputs("secret", f);
    fclose(f);
}


static void add_routes(sp_http_router_t *r)
{
    sp_http_router_add(r, SP_HTTP_EXACT, "/hello", SP_HTTP_M_GET, h_hello, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/echo", SP_HTTP_M_ANY, h_echo, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/empty", SP_HTTP_M_ANY, h_empty, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/nocontent", SP_HTTP_M_GET, h_nocontent, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/stream", SP_HTTP_M_GET, h_stream, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/fail", SP_HTTP_M_GET, h_fail, "x");
    sp_http_router_add(r, SP_HTTP_EXACT, "/fail-late", SP_HTTP_M_GET, h_fail_late, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/big", SP_HTTP_M_GET, h_big, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/fixed", SP_HTTP_M_GET, h_fixed_stream, NULL);
    sp_http_router_add(r, SP_HTTP_EXACT, "/post-only", SP_HTTP_M_POST | SP_HTTP_M_PUT,
                       h_named, "post-only");
    sp_http_router_add(r, SP_HTTP_PREFIX, "/api", SP_HTTP_M_GET, h_named, "api");
    sp_http_router_add(r, SP_HTTP_PREFIX, "/api/v2/", SP_HTTP_M_GET, h_named, "api-v2");
    sp_http_router_add(r, SP_HTTP_GLOB, "/img/*.png", SP_HTTP_M_GET, h_named, "png");
    sp_http_router_add(r, SP_HTTP_PREFIX, "/static", SP_HTTP_M_GET, sp_http_static_handler,
                       S.st);
}

static void server_start(const sp_http_server_opts_t *o)
{
    make_root();
    sp_http_static_opts_t so = {.strip_prefix = "/static", .max_age = 60};
    S.st = sp_http_static_create(root_dir, &so);
    ck_assert_ptr_nonnull(S.st);
    S.router = sp_http_router_create();
    add_routes(S.router);
    S.io = sp_iomanager_create("http", 2, false);
    ck_assert_ptr_nonnull(S.io);
    S.http = sp_http_server_create(S.io, sp_http_router_dispatch, S.router, o);
    ck_assert_ptr_nonnull(S.http);
    ck_assert_int_eq(sp_addr_parse("127.0.0.1:0", &S.addr), 0);
    ck_assert_int_eq(sp_http_server_listen(S.http, &S.addr), 0);
    ck_assert_int_eq(sp_iomanager_start(S.io), 0);
    ck_assert_int_eq(sp_http_server_start(S.http), 0);
    ck_assert_int_eq(sp_http_server_addr(S.http, 0, &S.addr), 0);
}

/* After the HTTP server stopped. */
static void server_free(void)
{
    ck_assert_int_eq(sp_iomanager_stop(S.io), 0);
    sp_http_server_destroy(S.http);
    sp_iomanager_destroy(S.io);
    sp_http_router_destroy(S.router);
    sp_http_static_destroy(S.st);
    remove_root();
}

static void server_stop(void)
{
    ck_assert_int_eq(sp_http_server_stop(S.http, 1000000), 0);
    server_free();
}

static void setup_default(void)
{
    server_start(NULL);
}

/* One request on a new connection; returns the response (caller frees). */
static resp_t once(const char *req)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    roundtrip(c, req, &r);
    client_close(c);
    return r;
}

static int status_of(const char *req)
{
    resp_t r = once(req);
    resp_free(&r);
    return r.status;
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: t\r\n\r\n"

/* One request on a new connection; its body must be `want`. */
static void check_body(const char *req, const char *want)
{
    resp_t r = once(req);
    ck_assert_msg(!strcmp(body_str(&r), want), "%s: got \"%s\"", req, r.body);
    resp_free(&r);
}

/* ---- basics ---------------------------------------------------------------- */

START_TEST(get_has_length_date_server)
{
    resp_t r = once(GET("/hello"));
    char v[64];
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(body_str(&r), "hello");
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "5");
    ck_assert_str_eq(hdr(&r, "server", v, sizeof v), "spindle");
    ck_assert_str_eq(hdr(&r, "content-type", v, sizeof v), "text/plain");
    ck_assert_ptr_nonnull(hdr(&r, "date", v, sizeof v));
    ck_assert_uint_eq(strlen(v), 29);
    ck_assert_ptr_nonnull(strstr(v, " GMT"));
    ck_assert_ptr_null(hdr(&r, "connection", v, sizeof v)); /* 1.1: kept alive */
    resp_free(&r);
    /* An empty body still says so. */
    r = once(GET("/empty"));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(hdr(&r, "content-length", v, sizeof v), "0");
    resp_free(&r);
    /* 204 has no body and no length. */
    r = once(GET("/nocontent"));
    ck_assert_int_eq(r.status, 204);
    ck_assert_ptr_null(hdr(&r, "content-length", v, sizeof v));
    resp_free(&r);
}
END_TEST

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

/* Starts its answer, says so on park_pipes[0], then waits (parked, with its
 * request and its response half made) for a byte on park_pipes[1] before
 * finishing from what the request said. Socket pairs: the hooks park a
 * fiber on sockets only. */
static int park_pipes[2][2];

static int h_park(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    const char *who = sp_http_request_header(req, "X-Test");
    char text[128];
    int n = snprintf(text, sizeof text, "before=%s", who);
    sp_http_response_set_header(res, "X-Who", who);
    sp_http_response_append(res, text, (size_t)n);
    char x = 'p';
    if (write(park_pipes[0][1], &x, 1) != 1 || read(park_pipes[1][0], &x, 1) != 1)
        return -EIO;
    n = snprintf(text, sizeof text, ",after=%s,n=%s", sp_http_request_header(req, "X-Test"),
                 sp_http_request_param(req, "n"));
    return sp_http_response_append(res, text, (size_t)n);
}

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

/* ---- routing --------------------------------------------------------------- */

START_TEST(router_exact_prefix_glob)
{
    check_body(GET("/api"), "api /api");
    check_body(GET("/api/users/7"), "api /api/users/7");
    check_body(GET("/api/v2/x"), "api-v2 /api/v2/x"); /* longest prefix wins */
    check_body(GET("/api/v2"), "api-v2 /api/v2");
    ck_assert_int_eq(status_of(GET("/apix")), 404);
    check_body(GET("/img/cat.png"), "png /img/cat.png");
    ck_assert_int_eq(status_of(GET("/img/a/cat.png")), 404); /* '*' stays in a segment */
    ck_assert_int_eq(status_of(GET("/img/cat.gif")), 404);
    ck_assert_int_eq(status_of("HEAD /img/x.png HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
}
END_TEST

START_TEST(router_405_with_allow)
{
    char v[128];
    resp_t r = once(GET("/post-only"));
    ck_assert_int_eq(r.status, 405);
    ck_assert_str_eq(hdr(&r, "allow", v, sizeof v), "POST, PUT");
    resp_free(&r);
    r = once("DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    ck_assert_int_eq(r.status, 405);
    ck_assert_str_eq(hdr(&r, "allow", v, sizeof v), "GET, HEAD");
    resp_free(&r);
    check_body("POST /post-only HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", "post-only /post-only");
    ck_assert_int_eq(status_of(GET("/nothing/here")), 404);
}
END_TEST

START_TEST(router_default_handler)
{
    sp_http_router_set_default(S.router, h_named, "default");
    resp_t r = once(GET("/nothing/here"));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(body_str(&r), "default /nothing/here");
    resp_free(&r);
    ck_assert_int_eq(status_of(GET("/post-only")), 405); /* a route still wins */
}
END_TEST

/* ---- errors and limits ----------------------------------------------------- */

/* Send bad bytes in writes of `piece` bytes, expect `status` and a closed
 * connection, then check the server still serves a new one. (The answer
 * may come before the last piece is sent: a write may fail then.) */
static void expect_refused_in_pieces(const char *req, size_t len, size_t piece, int status)
{
    client_t *c = client_open(&S.addr);
    for (size_t off = 0; off < len; off += piece) {
        size_t n = len - off < piece ? len - off : piece;
        if (sp_write_full(c->fd, req + off, n) != (ssize_t)n)
            break;
    }
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_msg(r.status == status, "%.40s: %d, not %d", req, r.status, status);
    char v[32];
    ck_assert_str_eq(hdr(&r, "connection", v, sizeof v), "close");
    resp_free(&r);
    /* The server closes (it may read and drop our bytes first). */
    c->len = 0;
    while (fill(c) > 0)
        c->len = 0;
    client_close(c);
    ck_assert_int_eq(status_of(GET("/hello")), 200);
}

static void expect_refused(const char *req, size_t len, int status)
{
    expect_refused_in_pieces(req, len, len, status);
}

static void refused(const char *req, int status)
{
    expect_refused(req, strlen(req), status);
}

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

static char *repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

START_TEST(server_name_without_control_bytes)
{
    sp_iomanager_t *io = sp_iomanager_create("names", 1, false);
    ck_assert_ptr_nonnull(io);
    const char *bad[] = {"a\rb", "a\nb", "a\001b", "a\x7f"};
    for (int i = 0; i < 4; i++) {
        sp_http_server_opts_t o = {.server_name = bad[i]};
        errno = 0;
        ck_assert_ptr_null(sp_http_server_create(io, sp_http_router_dispatch, NULL, &o));
        ck_assert_int_eq(errno, EINVAL);
    }
    sp_http_server_opts_t o = {.server_name = "my server\t1.0"};
    sp_http_server_t *srv = sp_http_server_create(io, sp_http_router_dispatch, NULL, &o);
    ck_assert_ptr_nonnull(srv);
    sp_http_server_destroy(srv);
    /* The same verdicts ahead of time, and the length limit. */
    ck_assert_int_eq(sp_http_server_check_name("a\nb"), -EINVAL);
    ck_assert_int_eq(sp_http_server_check_name("my server\t1.0"), 0);
    char *longest = repeat('n', SP_HTTP_SERVER_NAME_MAX);
    ck_assert_int_eq(sp_http_server_check_name(longest), 0);
    o.server_name = longest;
    ck_assert_ptr_nonnull(srv = sp_http_server_create(io, sp_http_router_dispatch, NULL, &o));
    sp_http_server_destroy(srv);
    char *over = repeat('n', SP_HTTP_SERVER_NAME_MAX + 1);
    ck_assert_int_eq(sp_http_server_check_name(over), -ENAMETOOLONG);
    o.server_name = over;
    errno = 0;
    ck_assert_ptr_null(sp_http_server_create(io, sp_http_router_dispatch, NULL, &o));
    ck_assert_int_eq(errno, ENAMETOOLONG);
    free(longest);
    free(over);
    sp_iomanager_destroy(io);
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

static void setup_short_timeouts(void)
{
    sp_http_server_opts_t o = {.header_timeout_ms = 300,
                               .keepalive_timeout_ms = 200,
                               .body_timeout_ms = 300,
                               .server_name = "test-server/1"};
    server_start(&o);
}

static uint64_t ms_since(uint64_t t0)
{
    return (sp_now_ns() - t0) / 1000000;
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

/* The client's next answer is 200 with "Connection: close", and then the
 * connection closes. */
static void expect_200_then_close(client_t *c)
{
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 200);
    char v[32];
    ck_assert_str_eq(hdr(&r, "connection", v, sizeof v), "close");
    resp_free(&r);
    assert_closed(c);
    client_close(c);
}

/* The client's next answer is 408, no sooner than 290 ms after t0. */
static void expect_408_closed(client_t *c, uint64_t t0)
{
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 408);
    ck_assert_uint_ge(ms_since(t0), 290);
    resp_free(&r);
    client_close(c);
}

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
    sp_http_server_opts_t o = {.body_timeout_ms = 10000, .body_deadline_ms = 300,
                               .max_body = BODY_MAX, .max_buffered_bodies = BODIES_CAP};
    server_start(&o);
}

static void setup_streaming(void)
{
    sp_http_server_opts_t o = {.stream_bodies = true, .max_body = 64u << 20,
                               .body_deadline_ms = 10000};
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
    char *body = repeat('b', PART);
    client_t *a = client_open(&S.addr);
    char head[160];
    snprintf(head, sizeof head, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n",
             PART + 1);
    send_str(a, head);
    ck_assert_int_eq(sp_write_full(a->fd, body, PART), PART); /* one byte short */
    sp_http_server_stats_t st;
    uint64_t t0 = sp_now_ns();
    for (sp_http_server_stats(S.http, &st); st.body_bytes < PART; sp_http_server_stats(S.http, &st)) {
        ck_assert_uint_lt(ms_since(t0), 5000);
        usleep(1000);
    }
    char *req = malloc(PART + 200);
    int n = snprintf(req, PART + 200, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s",
                     PART, body);
    expect_refused(req, (size_t)n, 503);
    client_close(a); /* its body is let go */
    t0 = sp_now_ns();
    for (sp_http_server_stats(S.http, &st); st.body_bytes; sp_http_server_stats(S.http, &st)) {
        ck_assert_uint_lt(ms_since(t0), 5000);
        usleep(1000);
    }
    client_t *b = client_open(&S.addr);
    resp_t r;
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
    sp_http_server_opts_t o = {.header_timeout_ms = 300,
                               .keepalive_timeout_ms = 2000,
                               .body_timeout_ms = 300,
                               .server_name = "test-server/1"};
    server_start(&o);
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

/* ---- connection limit -------------------------------------------------------- */

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

/* ---- static files ------------------------------------------------------------ */

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

/* ---- access log ----------------------------------------------------------------- */

static char log_lines[8192];
static size_t log_len;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_sink(const char *line, size_t len, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&log_lock);
    if (log_len + len < sizeof log_lines) {
        memcpy(log_lines + log_len, line, len);
        log_len += len;
    }
    pthread_mutex_unlock(&log_lock);
}

static void setup_access_log(void)
{
    sp_log_appender_t *a = sp_log_callback(log_sink, NULL, "%m%n");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(sp_logger_set_appenders(sp_logger("http.access"), &a, 1), 0);
    sp_log_appender_release(a);
    sp_http_server_opts_t o = {.access_log = true};
    server_start(&o);
}

START_TEST(access_log_line_per_request)
{
    status_of(GET("/hello?x=1"));
    status_of(GET("/missing"));
    refused("BAD\r\n\r\n", 400);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_ptr_nonnull(strstr(log_lines, "127.0.0.1:"));
    ck_assert_ptr_nonnull(strstr(log_lines, "\"GET /hello?x=1\" 200 5 "));
    ck_assert_ptr_nonnull(strstr(log_lines, "\"GET /missing\" 404 14 "));
    ck_assert_ptr_nonnull(strstr(log_lines, "\"- -\" 400 "));
    /* An error after the request line still logs it. */
    refused("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_ptr_nonnull(strstr(log_lines, "\"GET /a%zz\" 400 "));
    /* A quote or backslash in the target cannot end the field early. */
    status_of(GET("/hello?q=\"x\"\\"));
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_ptr_nonnull(strstr(log_lines, "\"GET /hello?q=\\x22x\\x22\\x5C\" 200 "));
    /* A download the client gives up: logged with the bytes that went out
     * (the line comes when the server's send fails: waited for, 10 s at
     * most). */
    client_t *c = client_open(&S.addr);
    send_str(c, GET("/static/huge.bin"));
    ck_assert_int_gt(fill(c), 0);
    client_close(c);
    const char *line = NULL;
    for (int i = 0; i < 1000 && !line; i++) {
        ck_assert_int_eq(sp_log_flush(), 0);
        pthread_mutex_lock(&log_lock);
        line = strstr(log_lines, "\"GET /static/huge.bin\" 200 ");
        pthread_mutex_unlock(&log_lock);
        if (!line)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    ck_assert_ptr_nonnull(line);
    unsigned long long sent = strtoull(line + strlen("\"GET /static/huge.bin\" 200 "), NULL, 10);
    ck_assert_uint_gt(sent, 0);
    ck_assert_uint_lt(sent, 64u << 20);
    ck_assert_ptr_nonnull(strstr(log_lines, "us\n"));
}
END_TEST

/* ---- stop ------------------------------------------------------------------------- */

START_TEST(stop_closes_idle_keepalive_at_once)
{
    client_t *c[10];
    for (int i = 0; i < 10; i++) {
        resp_t r;
        c[i] = client_open(&S.addr);
        roundtrip(c[i], GET("/hello"), &r);
        resp_free(&r);
    }
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(sp_http_server_stop(S.http, 5000000), 0);
    ck_assert_uint_lt(ms_since(t0), 2000); /* not the 5 s drain */
    for (int i = 0; i < 10; i++) {
        assert_closed(c[i]);
        client_close(c[i]);
    }
    server_free();
}
END_TEST

static void *stop_thread(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_http_server_stop(S.http, 5000000), 0);
    return NULL;
}

/* Whether the server's listener still takes connections. */
static bool still_listening(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(sp_addr_port(&S.addr)),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool up = connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0;
    close(fd);
    return up;
}

/* A handler still running when the stop begins answers with
 * "Connection: close", and the connection closes after it. */
START_TEST(stop_during_handler_answers_connection_close)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, park_pipes[0]), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, park_pipes[1]), 0);
    sp_http_router_add(S.router, SP_HTTP_EXACT, "/park", SP_HTTP_M_GET, h_park, NULL);
    client_t *c = client_open(&S.addr);
    send_str(c, "GET /park?n=1 HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n\r\n");
    char x;
    ck_assert_int_eq(read(park_pipes[0][0], &x, 1), 1); /* the handler runs */
    pthread_t stopper;
    ck_assert_int_eq(pthread_create(&stopper, NULL, stop_thread, NULL), 0);
    /* The listener is shut down after `stopping` is set. */
    uint64_t t0 = sp_now_ns();
    while (still_listening()) {
        ck_assert_uint_lt(ms_since(t0), 5000);
        usleep(1000);
    }
    ck_assert_int_eq(write(park_pipes[1][1], &x, 1), 1);
    expect_200_then_close(c);
    ck_assert_int_eq(pthread_join(stopper, NULL), 0);
    server_free();
}
END_TEST

/* ---- 1,000 concurrent keep-alive clients -------------------------------------------- */

enum { CLIENTS = 1000, ROUNDS = 5 };
static _Atomic int connected, clients_ok;

static void client_fiber(void *arg)
{
    int id = (int)(intptr_t)arg;
    client_t *c = calloc(1, sizeof *c);
    c->fd = sp_connect(&S.addr, 5000000);
    ck_assert_int_ge(c->fd, 0);
    atomic_fetch_add(&connected, 1);
    while (atomic_load(&connected) < CLIENTS) /* all open at once */
        sp_sleep_us(1000);
    for (int i = 0; i < ROUNDS; i++) {
        char req[128], want[64];
        snprintf(req, sizeof req, "GET /echo?id=%d&i=%d HTTP/1.1\r\nHost: t\r\n\r\n", id, i);
        snprintf(want, sizeof want, "param id=%d\nparam i=%d", id, i);
        resp_t r;
        send_str(c, req);
        ck_assert_int_eq(get_response(c, &r, false), 0);
        ck_assert_int_eq(r.status, 200);
        ck_assert_ptr_nonnull(strstr(body_str(&r), want));
        resp_free(&r);
    }
    client_close(c);
    atomic_fetch_add(&clients_ok, 1);
}

/* Run n client fibers fn(i) on their own IOManager until all are done. */
static void run_fibers(void (*fn)(void *), int n)
{
    sp_iomanager_t *cio = sp_iomanager_create("clients", 2, false);
    ck_assert_int_eq(sp_iomanager_start(cio), 0);
    for (intptr_t i = 0; i < n; i++)
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(cio), fn, (void *)i, SP_ANY_WORKER),
                         0);
    ck_assert_int_eq(sp_iomanager_stop(cio), 0);
    sp_iomanager_destroy(cio);
}

START_TEST(thousand_concurrent_keepalive_clients)
{
    run_fibers(client_fiber, CLIENTS);
    ck_assert_int_eq(atomic_load(&clients_ok), CLIENTS);
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.connections, CLIENTS);
    ck_assert_uint_eq(st.requests, CLIENTS * ROUNDS);
}
END_TEST

/* ---- the spindle-httpd program ------------------------------------------------------- */

typedef struct proc {
    pid_t pid;
    int port;
} proc_t;

static proc_t httpd_start(void)
{
    make_root();
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    proc_t p;
    p.pid = fork();
    ck_assert_int_ge(p.pid, 0);
    if (p.pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        execl(SPINDLE_HTTPD, "spindle-httpd", "--listen", "127.0.0.1:0", "--workers", "2",
              "--root", root_dir, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char line[128] = {0};
    size_t got = 0;
    while (got < sizeof line - 1 && !strchr(line, '\n')) {
        ssize_t n = read(out[0], line + got, sizeof line - 1 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    close(out[0]);
    ck_assert_ptr_nonnull(strstr(line, "listening on 127.0.0.1:"));
    p.port = atoi(strrchr(line, ':') + 1);
    ck_assert_int_gt(p.port, 0);
    return p;
}

static void httpd_stop(proc_t *p)
{
    kill(p->pid, SIGTERM);
    int status;
    ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    remove_root();
}

/* Run a command, return its stdout (static buffer). */
static const char *run(const char *cmd)
{
    static char out[4096];
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    ck_assert_int_eq(pclose(f), 0);
    return out;
}

START_TEST(httpd_with_curl)
{
    proc_t p = httpd_start();
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "curl -s -m 10 -w ' %%{http_code} %%{content_type}' http://127.0.0.1:%d/plaintext",
             p.port);
    ck_assert_str_eq(run(cmd), "Hello, World! 200 text/plain");
    snprintf(cmd, sizeof cmd,
             "curl -s -m 10 -w ' %%{http_code} %%{content_type}' http://127.0.0.1:%d/json", p.port);
    ck_assert_str_eq(run(cmd), "{\"message\":\"Hello, World!\"} 200 application/json");
    snprintf(cmd, sizeof cmd, "curl -s -m 10 -r 4-7 http://127.0.0.1:%d/a.txt", p.port);
    ck_assert_str_eq(run(cmd), "4567");
    snprintf(cmd, sizeof cmd, "curl -s -m 10 http://127.0.0.1:%d/", p.port);
    ck_assert_str_eq(run(cmd), "<h1>home</h1>\n");
    snprintf(cmd, sizeof cmd,
             "curl -s -m 10 --path-as-is -o /dev/null -o /dev/null -w '%%{http_code}' "
             "http://127.0.0.1:%d/../../etc/passwd http://127.0.0.1:%d/%%2e%%2e/etc/passwd",
             p.port, p.port);
    ck_assert_str_eq(run(cmd), "403403");
    /* curl's chunked upload goes to the static handler: 405, body read. */
    snprintf(cmd, sizeof cmd,
             "printf 'x' | curl -s -m 10 -o /dev/null -w '%%{http_code}' -H 'Transfer-Encoding: chunked' "
             "--data-binary @- http://127.0.0.1:%d/a.txt",
             p.port);
    ck_assert_str_eq(run(cmd), "405");
    /* A directory asked for as "//sub" is redirected within this site,
     * never to a "//sub/" a browser would read as another host. An
     * absolute-form target without a path asks for "/". */
    sp_addr_t a;
    snprintf(cmd, sizeof cmd, "127.0.0.1:%d", p.port);
    ck_assert_int_eq(sp_addr_parse(cmd, &a), 0);
    client_t *c = client_open(&a);
    resp_t r;
    char v[64];
    roundtrip(c, "GET //sub HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 301);
    ck_assert_str_eq(hdr(&r, "location", v, sizeof v), "/sub/");
    resp_free(&r);
    roundtrip(c, "GET http://t HTTP/1.1\r\nHost: t\r\n\r\n", &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(body_str(&r), "<h1>home</h1>\n");
    resp_free(&r);
    client_close(c);
    httpd_stop(&p);
}
END_TEST

START_TEST(httpd_rejects_bad_numbers)
{
    const char *bad[] = {"--max-conns -1", "--max-conns 5k", "--workers 0", "--workers ''"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "'%s' --listen 127.0.0.1:0 %s 2>/dev/null </dev/null",
                 SPINDLE_HTTPD, bad[i]);
        int st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s", bad[i]);
    }
}
END_TEST

START_TEST(httpd_with_python_http_client)
{
    proc_t p = httpd_start();
    char cmd[1024];
    /* One connection, several requests (keep-alive), HEAD, a 404. */
    snprintf(cmd, sizeof cmd,
             "python3 -c '\n"
             "import http.client\n"
             "c = http.client.HTTPConnection(\"127.0.0.1\", %d, timeout=10)\n"
             "out = []\n"
             "for m, u in [(\"GET\",\"/plaintext\"),(\"GET\",\"/json\"),(\"HEAD\",\"/plaintext\"),"
             "(\"GET\",\"/nope\"),(\"GET\",\"/a.txt\")]:\n"
             "    c.request(m, u)\n"
             "    r = c.getresponse()\n"
             "    out.append(\"%%d:%%s:%%s\" %% (r.status, r.getheader(\"Content-Length\"), r.read().decode()))\n"
             "print(\"|\".join(out), c.sock is not None)\n'",
             p.port);
    ck_assert_str_eq(run(cmd), "200:13:Hello, World!|200:27:{\"message\":\"Hello, World!\"}|"
                               "200:13:|404:14:404 Not Found\n|200:16:0123456789abcdef True\n");
    httpd_stop(&p);
}
END_TEST

/* ---- the client ------------------------------------------------------------------------ */

static const char *url(const char *path)
{
    static char text[256];
    snprintf(text, sizeof text, "http://127.0.0.1:%d%s", sp_addr_port(&S.addr), path);
    return text;
}

static const char *client_body(const sp_http_client_response_t *r)
{
    static char text[4096];
    size_t n;
    const char *b = sp_http_client_response_body(r, &n);
    ck_assert_uint_lt(n, sizeof text);
    memcpy(text, b, n);
    text[n] = '\0';
    return text;
}

/* On the test's own thread: the client waits with poll there. */
START_TEST(client_requests_and_pool)
{
    sp_http_client_t *cl = sp_http_client_create(NULL);
    sp_http_client_response_t *r;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(sp_http_get(cl, url("/hello"), &r), 0);
        ck_assert_int_eq(sp_http_client_response_status(r), 200);
        ck_assert_str_eq(client_body(r), "hello");
        ck_assert_str_eq(sp_http_client_response_header(r, "CONTENT-TYPE"), "text/plain");
        sp_http_client_response_free(r);
    }
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.connections, 1); /* kept alive, reused */
    const char *headers[] = {"X-Test: abc", NULL};
    sp_http_client_request_t rq = {"POST", url("/echo?k=v"), headers, "hello", 5};
    ck_assert_int_eq(sp_http_client_do(cl, &rq, &r), 0);
    ck_assert_ptr_nonnull(strstr(client_body(r), "x-test=abc"));
    ck_assert_ptr_nonnull(strstr(client_body(r), "body=5:hello\nparam k=v"));
    sp_http_client_response_free(r);
    ck_assert_int_eq(sp_http_post(cl, url("/echo"), "text/plain", "xy", 2, &r), 0);
    ck_assert_ptr_nonnull(strstr(client_body(r), "method=POST"));
    ck_assert_ptr_nonnull(strstr(client_body(r), "body=2:xy"));
    sp_http_client_response_free(r);
    ck_assert_int_eq(sp_http_get(cl, url("/stream"), &r), 0); /* chunked */
    ck_assert_str_eq(client_body(r), "one,two,three");
    sp_http_client_response_free(r);
    rq = (sp_http_client_request_t){.method = "HEAD", .url = url("/hello")};
    ck_assert_int_eq(sp_http_client_do(cl, &rq, &r), 0);
    ck_assert_str_eq(sp_http_client_response_header(r, "content-length"), "5");
    ck_assert_str_eq(client_body(r), "");
    sp_http_client_response_free(r);
    ck_assert_int_eq(sp_http_get(cl, url("/missing"), &r), 0);
    ck_assert_int_eq(sp_http_client_response_status(r), 404);
    sp_http_client_response_free(r);
    ck_assert_int_eq(sp_http_get(cl, url("/big"), &r), 0);
    size_t n;
    sp_http_client_response_body(r, &n);
    ck_assert_uint_eq(n, 3u << 20);
    sp_http_client_response_free(r);
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.connections, 1);
    sp_http_client_destroy(cl);
}
END_TEST

START_TEST(client_errors)
{
    sp_http_client_opts_t o = {.max_response = 1 << 20};
    sp_http_client_t *cl = sp_http_client_create(&o);
    sp_http_client_response_t *r = NULL;
    ck_assert_int_eq(sp_http_get(cl, "ftp://127.0.0.1/x", &r), -EPROTONOSUPPORT);
    ck_assert_int_eq(sp_http_get(cl, "not a url", &r), -EINVAL);
    const char *bad[] = {"X-Evil: a\r\nInjected: b", NULL};
    sp_http_client_request_t rq = {.url = url("/hello"), .headers = bad};
    ck_assert_int_eq(sp_http_client_do(cl, &rq, &r), -EINVAL);
    ck_assert_int_eq(sp_http_get(cl, url("/big"), &r), -EMSGSIZE); /* 3 MiB > 1 MiB */
    /* A port nobody listens on. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sp_addr_t a;
    sp_addr_parse("127.0.0.1:0", &a);
    bind(s, (struct sockaddr *)&a.ss, a.len);
    sp_addr_of_socket(s, false, &a);
    close(s);
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", sp_addr_port(&a));
    ck_assert_int_eq(sp_http_get(cl, u, &r), -ECONNREFUSED);
    ck_assert_ptr_null(r);
    sp_http_client_destroy(cl);
}
END_TEST

START_TEST(client_read_timeout)
{
    /* Connections complete in the kernel's backlog; nobody ever answers. */
    sp_addr_t a;
    sp_addr_parse("127.0.0.1:0", &a);
    int l = sp_listen(&a, NULL);
    ck_assert_int_ge(l, 0);
    sp_addr_of_socket(l, false, &a);
    sp_http_client_opts_t o = {.timeout_ms = 200};
    sp_http_client_t *cl = sp_http_client_create(&o);
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", sp_addr_port(&a));
    sp_http_client_response_t *r;
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(sp_http_get(cl, u, &r), -ETIMEDOUT);
    ck_assert_uint_ge(ms_since(t0), 190);
    ck_assert_uint_lt(ms_since(t0), 3000);
    sp_http_client_destroy(cl);
    close(l);
}
END_TEST

/* A raw server scripted by raw_serve below. */
typedef struct raw_server {
    int fd;
    const char *answers[2];
} raw_server_t;

static int read_head(int c)
{
    char buf[4096];
    size_t len = 0;
    while (!memmem(buf, len, "\r\n\r\n", 4) && len < sizeof buf) {
        ssize_t n = read(c, buf + len, sizeof buf - len);
        if (n <= 0)
            return -1;
        len += (size_t)n;
    }
    return 0;
}

/* Connection 1: answers[0], then takes the next request and closes without
 * an answer (a keep-alive connection the server drops just as the client
 * reuses it). Connection 2: answers[1], then closes. */
static void *raw_serve(void *arg)
{
    raw_server_t *rs = arg;
    for (int i = 0; i < 2; i++) {
        int c = accept(rs->fd, NULL, NULL);
        read_head(c);
        sp_write_full(c, rs->answers[i], strlen(rs->answers[i]));
        if (i == 0)
            read_head(c);
        close(c);
    }
    return NULL;
}

START_TEST(client_replaces_closed_pooled_connection)
{
    raw_server_t rs = {-1,
                       {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the close"}};
    sp_addr_t a;
    sp_addr_parse("127.0.0.1:0", &a);
    rs.fd = sp_listen(&a, NULL);
    sp_addr_of_socket(rs.fd, false, &a);
    pthread_t th;
    pthread_create(&th, NULL, raw_serve, &rs);
    sp_http_client_t *cl = sp_http_client_create(NULL);
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", sp_addr_port(&a));
    sp_http_client_response_t *r;
    ck_assert_int_eq(sp_http_get(cl, u, &r), 0); /* the 100 is skipped */
    ck_assert_int_eq(sp_http_client_response_status(r), 200);
    ck_assert_str_eq(client_body(r), "ok");
    sp_http_client_response_free(r);
    /* Pooled, but the server closes it when the request arrives, before
     * any answer: the request goes again on a new connection. */
    ck_assert_int_eq(sp_http_get(cl, u, &r), 0);
    ck_assert_str_eq(client_body(r), "until the close");
    sp_http_client_response_free(r);
    pthread_join(th, NULL);
    close(rs.fd);
    sp_http_client_destroy(cl);
}
END_TEST

/* A scripted server on a plain thread: connection i gets answers[i][0],
 * answers[i][1]... one per request (NULL ends it; "" reads the request and
 * closes without an answer). Request heads are kept in `heads`, bodies
 * (Content-Length) read and dropped unless skip_bodies. With `hold`, answered connections stay
 * open until the script ends, so a client that reuses one it should not
 * gets no answer. */
typedef struct script {
    int fd;
    int nconns;
    const char *answers[4][4];
    bool hold;
    bool skip_bodies; /* answer after the head, leaving any body unread */
    char heads[8192];
    size_t heads_len;
    int requests;
} script_t;

static int script_read_request(script_t *s, int c)
{
    char buf[4096];
    size_t len = 0;
    char *end;
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
        ssize_t n = len < sizeof buf ? read(c, buf + len, sizeof buf - len) : -1;
        if (n <= 0)
            return -1;
        len += (size_t)n;
    }
    size_t head = (size_t)(end + 4 - buf);
    if (s->heads_len + head < sizeof s->heads) {
        memcpy(s->heads + s->heads_len, buf, head);
        s->heads_len += head;
    }
    s->requests++;
    /* strcasestr needs a string: end the head after its last header line
     * (the bytes past len are not initialised). */
    end[2] = '\0';
    const char *cl = s->skip_bodies ? NULL : strcasestr(buf, "\r\nContent-Length: ");
    size_t body = cl ? strtoul(cl + 18, NULL, 10) : 0, have = len - head;
    while (have < body) {
        ssize_t n = read(c, buf, sizeof buf < body - have ? sizeof buf : body - have);
        if (n <= 0)
            return -1;
        have += (size_t)n;
    }
    return 0;
}

static void *script_serve(void *arg)
{
    script_t *s = arg;
    int held[4], nheld = 0;
    for (int i = 0; i < s->nconns; i++) {
        int c = accept(s->fd, NULL, NULL);
        if (c < 0)
            break;
        bool open = true;
        for (int k = 0; k < 4 && s->answers[i][k] && open; k++) {
            open = script_read_request(s, c) == 0 && *s->answers[i][k];
            if (open)
                sp_write_full(c, s->answers[i][k], strlen(s->answers[i][k]));
        }
        if (open && s->hold)
            held[nheld++] = c;
        else
            close(c);
    }
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    return NULL;
}

typedef struct scripted {
    script_t s;
    pthread_t th;
    char url[64];
    sp_http_client_t *cl;
} scripted_t;

/* Start the script's server and a client with a 2 s timeout per wait. */
static void scripted_start(scripted_t *x)
{
    sp_addr_t a;
    ck_assert_int_eq(sp_addr_parse("127.0.0.1:0", &a), 0);
    x->s.fd = sp_listen(&a, NULL);
    ck_assert_int_ge(x->s.fd, 0);
    sp_addr_of_socket(x->s.fd, false, &a);
    snprintf(x->url, sizeof x->url, "http://127.0.0.1:%d", sp_addr_port(&a));
    ck_assert_int_eq(pthread_create(&x->th, NULL, script_serve, &x->s), 0);
    sp_http_client_opts_t o = {.timeout_ms = 2000};
    x->cl = sp_http_client_create(&o);
    ck_assert_ptr_nonnull(x->cl);
}

static void scripted_end(scripted_t *x)
{
    shutdown(x->s.fd, SHUT_RDWR); /* an accept still waiting returns */
    pthread_join(x->th, NULL);
    close(x->s.fd);
    sp_http_client_destroy(x->cl);
}

static int scripted_get(scripted_t *x, const char *path, sp_http_client_response_t **r)
{
    char u[128];
    snprintf(u, sizeof u, "%s%s", x->url, path);
    return sp_http_get(x->cl, u, r);
}

START_TEST(client_bodiless_answers)
{
    /* 304 and 204 end at their blank line whatever length they announce;
     * the connection stays in step (the script serves one connection). */
    scripted_t x = {.s = {.nconns = 1,
                          .answers = {{"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n",
                                       "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
                                       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", NULL}}}};
    scripted_start(&x);
    sp_http_client_response_t *r;
    int want[] = {304, 204, 200};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(scripted_get(&x, "/", &r), 0);
        ck_assert_int_eq(sp_http_client_response_status(r), want[i]);
        ck_assert_str_eq(client_body(r), i == 2 ? "ok" : "");
        sp_http_client_response_free(r);
    }
    scripted_end(&x);
    ck_assert_int_eq(x.s.requests, 3);
}
END_TEST

START_TEST(client_101_connection_not_reused)
{
    /* The first connection switched protocols (and is held open): the next
     * request must go on a new one, or it waits for an answer that never
     * comes. */
    scripted_t x = {.s = {.nconns = 2, .hold = true,
                          .answers = {{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n"
                                       "Connection: Upgrade\r\n\r\n", NULL},
                                      {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh", NULL}}}};
    scripted_start(&x);
    sp_http_client_response_t *r;
    ck_assert_int_eq(scripted_get(&x, "/upgrade", &r), 0);
    ck_assert_int_eq(sp_http_client_response_status(r), 101);
    sp_http_client_response_free(r);
    ck_assert_int_eq(scripted_get(&x, "/after", &r), 0);
    ck_assert_str_eq(client_body(r), "fresh");
    sp_http_client_response_free(r);
    scripted_end(&x);
}
END_TEST

START_TEST(client_request_line_and_headers)
{
    scripted_t x = {.s = {.nconns = 1,
                          .answers = {{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                                       "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", NULL}}}};
    scripted_start(&x);
    sp_http_client_response_t *r;
    /* A query without a path asks for "/?q". */
    char u[128];
    snprintf(u, sizeof u, "%s?q=1", x.url);
    ck_assert_int_eq(sp_http_get(x.cl, u, &r), 0);
    sp_http_client_response_free(r);
    /* A caller's Host replaces the URL's; POST without a content type. */
    const char *vhost[] = {"Host: vhost.example", NULL};
    ck_assert_int_eq(sp_http_client_do(x.cl, &(sp_http_client_request_t){
                         .method = "POST", .url = x.url, .headers = vhost,
                         .body = "abc", .body_len = 3}, &r), 0);
    sp_http_client_response_free(r);
    /* What the client refuses before sending anything. */
    const char *bad[][2] = {{"Content-Length: 2", NULL}, {"Transfer-Encoding: chunked", NULL},
                            {"X-A: a\001b", NULL}, {"X-A: a\x7f", NULL},
                            {"Bad Name: x", NULL}, {": x", NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(sp_http_client_do(x.cl, &(sp_http_client_request_t){
                             .url = x.url, .headers = bad[i]}, &r), -EINVAL);
    ck_assert_int_eq(sp_http_client_do(x.cl, &(sp_http_client_request_t){
                         .method = "POST", .url = x.url, .body_len = 5}, &r), -EINVAL);
    snprintf(u, sizeof u, "%s/a\tb", x.url);
    ck_assert_int_eq(sp_http_get(x.cl, u, &r), -EINVAL);
    scripted_end(&x);
    ck_assert_int_eq(x.s.requests, 2);
    x.s.heads[x.s.heads_len] = '\0';
    ck_assert_ptr_nonnull(strstr(x.s.heads, "GET /?q=1 HTTP/1.1\r\n"));
    char *post = strstr(x.s.heads, "POST / HTTP/1.1\r\n");
    ck_assert_ptr_nonnull(post);
    ck_assert_ptr_nonnull(strstr(post, "\r\nHost: vhost.example\r\n"));
    ck_assert_ptr_null(strstr(post, "\r\nHost: 127.0.0.1"));
    ck_assert_ptr_null(strcasestr(post, "content-type"));
}
END_TEST

START_TEST(client_post_not_replayed)
{
    /* A pooled connection on which the server reads the POST and closes
     * without answering: the POST may have been processed, so it is not
     * sent again (a GET is, once: client_replaces_closed_pooled_connection). */
    scripted_t x = {.s = {.nconns = 2,
                          .answers = {{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "", NULL},
                                      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", NULL}}}};
    scripted_start(&x);
    sp_http_client_response_t *r;
    ck_assert_int_eq(scripted_get(&x, "/", &r), 0); /* pools the connection */
    sp_http_client_response_free(r);
    char u[128];
    snprintf(u, sizeof u, "%s/order", x.url);
    ck_assert_int_eq(sp_http_post(x.cl, u, "text/plain", "pay 1", 5, &r), -ECONNRESET);
    ck_assert_int_eq(scripted_get(&x, "/", &r), 0); /* the next request is fine */
    sp_http_client_response_free(r);
    scripted_end(&x);
    x.s.heads[x.s.heads_len] = '\0';
    int posts = 0;
    for (const char *p = x.s.heads; (p = strstr(p, "POST /order")); p++)
        posts++;
    ck_assert_int_eq(posts, 1);
}
END_TEST

START_TEST(client_reads_early_answer)
{
    /* The server answers 413 after the head and closes with the body
     * unread (the kernel resets): the send fails, the answer is returned. */
    scripted_t x = {.s = {.nconns = 1, .skip_bodies = true,
                          .answers = {{"HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n"
                                       "Content-Length: 0\r\n\r\n", NULL}}}};
    scripted_start(&x);
    size_t n = 8u << 20;
    char *body = calloc(1, n);
    sp_http_client_response_t *r;
    ck_assert_int_eq(sp_http_post(x.cl, x.url, "application/octet-stream", body, n, &r), 0);
    ck_assert_int_eq(sp_http_client_response_status(r), 413);
    sp_http_client_response_free(r);
    free(body);
    scripted_end(&x);
}
END_TEST

START_TEST(client_refuses_non_http1_answers)
{
    scripted_t x = {.s = {.nconns = 1,
                          .answers = {{"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", NULL}}}};
    scripted_start(&x);
    sp_http_client_response_t *r;
    ck_assert_int_eq(scripted_get(&x, "/", &r), -EPROTO);
    scripted_end(&x);
}
END_TEST

enum { CLIENT_FIBERS = 200, CLIENT_ROUNDS = 5 };
static sp_http_client_t *shared_client;
static _Atomic int fiber_requests_ok;

static void client_user_fiber(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < CLIENT_ROUNDS; i++) {
        char path[64], want[64];
        snprintf(path, sizeof path, "/echo?id=%d&i=%d", id, i);
        snprintf(want, sizeof want, "param id=%d\nparam i=%d", id, i);
        sp_http_client_response_t *r;
        char u[128];
        snprintf(u, sizeof u, "http://127.0.0.1:%d%s", sp_addr_port(&S.addr), path);
        ck_assert_int_eq(sp_http_get(shared_client, u, &r), 0);
        size_t n;
        const char *b = sp_http_client_response_body(r, &n);
        ck_assert_ptr_nonnull(memmem(b, n, want, strlen(want)));
        sp_http_client_response_free(r);
        atomic_fetch_add(&fiber_requests_ok, 1);
    }
}

START_TEST(client_shared_by_fibers)
{
    shared_client = sp_http_client_create(NULL);
    run_fibers(client_user_fiber, CLIENT_FIBERS);
    ck_assert_int_eq(atomic_load(&fiber_requests_ok), CLIENT_FIBERS * CLIENT_ROUNDS);
    sp_http_client_destroy(shared_client);
}
END_TEST

typedef void (*fixture_fn)(void);

/* One test case: its fixtures (NULL: none) and tests. */
static void add_case(Suite *s, const char *name, fixture_fn setup, fixture_fn teardown,
                     const TTest *const *tests, size_t n)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 60);
    if (setup)
        tcase_add_checked_fixture(tc, setup, teardown);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
}

#define ADD_CASE(s, name, setup, teardown, ...)                                    \
    do {                                                                           \
        const TTest *const tests_[] = {__VA_ARGS__};                               \
        add_case(s, name, setup, teardown, tests_, sizeof tests_ / sizeof *tests_); \
    } while (0)

/* ---- the client against nginx, where it is installed -------------------- */

static int unused_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s);
    return ntohs(a.sin_port);
}

START_TEST(client_against_nginx)
{
    const char *nginx = "/usr/sbin/nginx";
    if (access(nginx, X_OK) != 0) {
        printf("client_against_nginx: nginx not installed, skipped\n");
        return;
    }
    char dir[] = "/tmp/spindle-nginx-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    int port = unused_port();
    char conf[512], path[128];
    snprintf(path, sizeof path, "%s/nginx.conf", dir);
    snprintf(conf, sizeof conf,
             "daemon off; master_process off; worker_processes 1;\n"
             "pid %s/nginx.pid; error_log %s/error.log;\n"
             "events { worker_connections 64; }\n"
             "http { access_log off; client_body_temp_path %s;\n"
             "  server { listen 127.0.0.1:%d; keepalive_requests 100;\n"
             "    location / { return 200 \"hello from nginx\"; } } }\n",
             dir, dir, dir, port);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(conf, f);
    fclose(f);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(nginx, "nginx", "-p", dir, "-c", path, "-e", "stderr", (char *)NULL);
        _exit(127);
    }
    /* Ready when it accepts: bounded connect attempts. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool up = false;
    for (int i = 0; i < 500 && !up; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        up = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
        close(s);
        if (!up) {
            struct timespec ms10 = {0, 10000000};
            nanosleep(&ms10, NULL);
        }
    }
    ck_assert_msg(up, "nginx did not start");
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", port);
    sp_http_client_t *cl = sp_http_client_create(NULL);
    sp_http_client_response_t *r;
    for (int i = 0; i < 3; i++) { /* keep-alive: one pooled connection */
        ck_assert_int_eq(sp_http_get(cl, u, &r), 0);
        ck_assert_int_eq(sp_http_client_response_status(r), 200);
        ck_assert_str_eq(client_body(r), "hello from nginx");
        sp_http_client_response_free(r);
    }
    ck_assert_int_eq(sp_http_post(cl, u, "text/plain", "abc", 3, &r), 0);
    ck_assert_int_eq(sp_http_client_response_status(r), 200);
    sp_http_client_response_free(r);
    sp_http_client_destroy(cl);
    kill(pid, SIGTERM);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("http");
    ADD_CASE(s, "server", setup_default, server_stop, get_has_length_date_server,
             request_fields_decoded, header_lookup_case_insensitive, keep_alive_rules,
             pipelining_hundred_in_one_write,
             partial_request_survives_other_connections,
             parked_handler_keeps_its_request_and_response, request_split_into_single_bytes,
             chunked_request_body, head_has_headers_without_body, expect_100_continue,
             streamed_response_chunked_and_http10, router_exact_prefix_glob,
             router_405_with_allow, router_default_handler, malformed_requests_400,
             verdict_independent_of_segmentation,
             smuggling_framing_400, host_value_checked, head_errors_have_no_body,
             limits_414_431_413,
             handler_error_500_and_connection_survives, static_files_served,
             static_big_file_sendfile, static_no_escape_from_root,
             static_ranges_and_conditional, static_if_range_and_huge_ranges,
             static_out_of_fds_is_503,
             static_redirect_location_encoded, thousand_concurrent_keepalive_clients);
    ADD_CASE(s, "timeouts", setup_short_timeouts, server_stop, slowloris_gets_408,
             stalled_body_gets_408, idle_keepalive_closed_silently);
    ADD_CASE(s, "deadlines", setup_long_keepalive, server_stop,
             keepalive_deadline_moves_with_each_request,
             stalled_second_request_gets_408_before_keepalive);
    ADD_CASE(s, "limits", setup_two_conns, server_stop, over_max_conns_503);
    ADD_CASE(s, "no_body", setup_no_body, server_stop, no_body_refuses_every_body);
    ADD_CASE(s, "access_log", setup_access_log, server_stop, access_log_line_per_request);
    /* This one stops the server itself. */
    ADD_CASE(s, "bodies", setup_body_limits, server_stop, trickled_body_gets_408_at_its_deadline,
             bodies_over_the_server_cap_get_503);
    ADD_CASE(s, "streaming", setup_streaming, server_stop, streamed_body_read_in_pieces,
             streamed_body_unread_or_failing);
    ADD_CASE(s, "stop", setup_default, NULL, stop_closes_idle_keepalive_at_once,
             stop_during_handler_answers_connection_close);
    ADD_CASE(s, "program", NULL, NULL, httpd_with_curl, httpd_with_python_http_client,
             httpd_rejects_bad_numbers, server_name_without_control_bytes);
    ADD_CASE(s, "client", setup_default, server_stop, client_requests_and_pool, client_errors,
             client_read_timeout, client_replaces_closed_pooled_connection,
             client_bodiless_answers, client_101_connection_not_reused,
             client_request_line_and_headers, client_post_not_replayed,
             client_reads_early_answer, client_refuses_non_http1_answers,
             client_shared_by_fibers);
    ADD_CASE(s, "nginx", NULL, NULL, client_against_nginx);
    return sp_test_run(s);
}
