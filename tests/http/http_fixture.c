/* The HTTP tests' shared parts: a tiny HTTP client on a blocking socket
 * (every read bounded by SO_RCVTIMEO), the in-process server on
 * 127.0.0.1 with its routes and static tree, and the checks several
 * feature files make. */
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

client_t *client_open(const sp_addr_t *a)
{
    client_t *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(c->fd, 0);
    struct timeval tv = {10, 0}; /* no test waits forever */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert_int_eq(connect(c->fd, (const struct sockaddr *)&a->ss, a->len), 0);
    return c;
}

void client_close(client_t *c)
{
    close(c->fd);
    free(c);
}

void send_str(client_t *c, const char *s)
{
    ck_assert_int_eq(sp_write_full(c->fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* More bytes into the buffer: the count, 0 at EOF, -1 on error/timeout. */
ssize_t fill(client_t *c)
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

int take_line(client_t *c, char *line, size_t size)
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
const char *hdr(const resp_t *r, const char *name, char *out, size_t size)
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
int get_response(client_t *c, resp_t *r, bool head_only)
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

void resp_free(resp_t *r)
{
    free(r->body);
    r->body = NULL;
}

/* The body as a string (for short text bodies). */
const char *body_str(resp_t *r)
{
    r->body = realloc(r->body, r->body_len + 1);
    r->body[r->body_len] = '\0';
    return r->body;
}

/* Send a request, read the answer. */
void roundtrip(client_t *c, const char *req, resp_t *r)
{
    send_str(c, req);
    ck_assert_int_eq(get_response(c, r, !strncmp(req, "HEAD", 4)), 0);
}

/* The server closed the connection: EOF with no further byte. */
void assert_closed(client_t *c)
{
    ck_assert_uint_eq(c->len, 0);
    char x;
    ck_assert_int_eq(read(c->fd, &x, 1), 0);
}

server_t S;
char root_dir[64];

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
int h_named(sp_http_request_t *req, sp_http_response_t *res, void *arg)
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
    ck_assert_int_eq(sp_http_response_add_header(res, "X-Evil", "a\nb"), -EINVAL);
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

void remove_root(void)
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
void make_root(void)
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


void (*server_extra_routes)(sp_http_router_t *r);

static void add_routes(sp_http_router_t *r)
{
    if (server_extra_routes)
        server_extra_routes(r);
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

void server_start(const sp_http_server_opts_t *o)
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
void server_free(void)
{
    ck_assert_int_eq(sp_iomanager_stop(S.io), 0);
    sp_http_server_destroy(S.http);
    sp_iomanager_destroy(S.io);
    sp_http_router_destroy(S.router);
    sp_http_static_destroy(S.st);
    remove_root();
}

void server_stop(void)
{
    ck_assert_int_eq(sp_http_server_stop(S.http, 1000000), 0);
    server_free();
}

void setup_default(void)
{
    server_start(NULL);
}

/* One request on a new connection; returns the response (caller frees). */
resp_t once(const char *req)
{
    client_t *c = client_open(&S.addr);
    resp_t r;
    roundtrip(c, req, &r);
    client_close(c);
    return r;
}

int status_of(const char *req)
{
    resp_t r = once(req);
    resp_free(&r);
    return r.status;
}


/* One request on a new connection; its body must be `want`. */
void check_body(const char *req, const char *want)
{
    resp_t r = once(req);
    ck_assert_msg(!strcmp(body_str(&r), want), "%s: got \"%s\"", req, r.body);
    resp_free(&r);
}

/* Starts its answer, says so on park_pipes[0], then waits (parked, with its
 * request and its response half made) for a byte on park_pipes[1] before
 * finishing from what the request said. Socket pairs: the hooks park a
 * fiber on sockets only. */
int park_pipes[2][2];

int h_park(sp_http_request_t *req, sp_http_response_t *res, void *arg)
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

/* Send bad bytes in writes of `piece` bytes, expect `status` and a closed
 * connection, then check the server still serves a new one. (The answer
 * may come before the last piece is sent: a write may fail then.) */
void expect_refused_in_pieces(const char *req, size_t len, size_t piece, int status)
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

void expect_refused(const char *req, size_t len, int status)
{
    expect_refused_in_pieces(req, len, len, status);
}

void refused(const char *req, int status)
{
    expect_refused(req, strlen(req), status);
}

char *repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

uint64_t ms_since(uint64_t t0)
{
    return (sp_now_ns() - t0) / 1000000;
}

/* The client's next answer is 200 with "Connection: close", and then the
 * connection closes. */
void expect_200_then_close(client_t *c)
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
void expect_408_closed(client_t *c, uint64_t t0)
{
    resp_t r;
    ck_assert_int_eq(get_response(c, &r, false), 0);
    ck_assert_int_eq(r.status, 408);
    ck_assert_uint_ge(ms_since(t0), 290);
    resp_free(&r);
    client_close(c);
}

/* Run n client fibers fn(i) on their own IOManager until all are done. */
void run_fibers(void (*fn)(void *), int n)
{
    sp_iomanager_t *cio = sp_iomanager_create("clients", 2, false);
    ck_assert_int_eq(sp_iomanager_start(cio), 0);
    for (intptr_t i = 0; i < n; i++)
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(cio), fn, (void *)i, SP_ANY_WORKER),
                         0);
    ck_assert_int_eq(sp_iomanager_stop(cio), 0);
    sp_iomanager_destroy(cio);
}

Suite *http_suite(const char *name)
{
    signal(SIGPIPE, SIG_IGN);
    return suite_create(name);
}
