/* HTTP server, as a whole: the response basics, routing, server names, the
 * access log, stopping, 1,000 concurrent keep-alive client fibers, and the
 * spindle-httpd program with curl, python3 http.client and websockets. */
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

/* ---- stats ------------------------------------------------------------------------ */

static sp_http_server_stats_t stats_now(void)
{
    sp_http_server_stats_t st;
    ck_assert_int_eq(sp_http_server_stats(S.http, &st), 0);
    return st;
}

/* The connection that answered waits for a next request: the server marks
 * it idle a moment after its answer left, so wait (bounded) for that. */
static void wait_idle(uint64_t n)
{
    for (int i = 0; i < 10000 && stats_now().idle != n; i++)
        usleep(1000);
    ck_assert_uint_eq(stats_now().idle, n);
}

/* N requests on one keep-alive connection, a 404 and a 414: each counter
 * moves by what was sent and answered. */
START_TEST(stats_count_a_known_load)
{
    enum { N = 25 };
    sp_http_server_stats_t a = stats_now();
    client_t *c = client_open(&S.addr);
    resp_t r;
    size_t sent = 0;
    for (int i = 0; i < N; i++) {
        roundtrip(c, GET("/hello"), &r);
        ck_assert_int_eq(r.status, 200);
        resp_free(&r);
        sent += strlen(GET("/hello"));
    }
    roundtrip(c, GET("/missing"), &r);
    ck_assert_int_eq(r.status, 404);
    resp_free(&r);
    sent += strlen(GET("/missing"));
    wait_idle(1);
    sp_http_server_stats_t b = stats_now();
    ck_assert_uint_eq(b.requests - a.requests, N + 1);
    ck_assert_uint_eq(b.status[1] - a.status[1], N);
    ck_assert_uint_eq(b.status[3] - a.status[3], 1);
    ck_assert_uint_eq(b.bytes_in - a.bytes_in, sent);
    ck_assert_uint_eq(b.active, 1);
    uint64_t timed = 0;
    for (int i = 0; i <= SP_HTTP_LATENCY_BUCKETS; i++)
        timed += b.latency[i] - a.latency[i];
    ck_assert_uint_eq(timed, N + 1);
    ck_assert_uint_gt(b.bytes_out, a.bytes_out);
    client_close(c);
    char *req = malloc(20000);
    snprintf(req, 20000, "GET /%0*d HTTP/1.1\r\nHost: t\r\n\r\n", 10000, 0);
    expect_refused(req, strlen(req), 414);
    free(req);
    sp_http_server_stats_t z = stats_now();
    ck_assert_uint_eq(z.limits[SP_HTTP_LIMIT_URI] - a.limits[SP_HTTP_LIMIT_URI], 1);
    ck_assert_uint_eq(z.status[3] - a.status[3], 2);
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
    /* An idle keep-alive connection: the stop closes it only after it has
     * set `stopping`, so its EOF says the parked handler will see the stop. */
    client_t *idle = client_open(&S.addr);
    resp_t r;
    roundtrip(idle, GET("/hello"), &r);
    resp_free(&r);
    client_t *c = client_open(&S.addr);
    send_str(c, "GET /park?n=1 HTTP/1.1\r\nHost: t\r\nX-Test: a\r\n\r\n");
    char x;
    ck_assert_int_eq(read(park_pipes[0][0], &x, 1), 1); /* the handler runs */
    pthread_t stopper;
    ck_assert_int_eq(pthread_create(&stopper, NULL, stop_thread, NULL), 0);
    assert_closed(idle); /* bounded by the client's receive timeout */
    client_close(idle);
    ck_assert_int_eq(write(park_pipes[1][1], &x, 1), 1);
    expect_200_then_close(c);
    ck_assert_int_eq(pthread_join(stopper, NULL), 0);
    ck_assert(!still_listening()); /* the stop has returned: no listener left */
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
              "--root", root_dir, "--ws-echo", "/ws", (char *)NULL);
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

/* --ws-echo: Python's websockets library (Debian's interpreter has it). */
START_TEST(httpd_ws_echo_with_python)
{
    proc_t p = httpd_start();
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c '\n"
             "import asyncio, websockets\n"
             "async def main():\n"
             "    async with websockets.connect(\"ws://127.0.0.1:%d/ws\") as ws:\n"
             "        await ws.send(\"ping me\")\n"
             "        print(await ws.recv())\n"
             "asyncio.run(asyncio.wait_for(main(), 10))\n'",
             p.port);
    ck_assert_str_eq(run(cmd), "ping me\n");
    httpd_stop(&p);
}
END_TEST

/* Two servers on one thread, each answer with its own Server line (the
 * start of a 200 is kept per thread: it must not mix them up). */
static sp_http_server_t *named_server(sp_iomanager_t *io, const char *name, sp_addr_t *a)
{
    sp_http_server_opts_t o = {.server_name = name};
    sp_http_server_t *srv = sp_http_server_create(io, sp_http_router_dispatch, S.router, &o);
    ck_assert_ptr_nonnull(srv);
    ck_assert_int_eq(sp_addr_parse("127.0.0.1:0", a), 0);
    ck_assert_int_eq(sp_http_server_listen(srv, a), 0);
    ck_assert_int_eq(sp_http_server_start(srv), 0);
    ck_assert_int_eq(sp_http_server_addr(srv, 0, a), 0);
    return srv;
}

START_TEST(two_servers_keep_their_names)
{
    sp_iomanager_t *io = sp_iomanager_create("names", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    sp_addr_t a[2];
    sp_http_server_t *srv[2] = {named_server(io, "first/1", &a[0]),
                                named_server(io, "second/2", &a[1])};
    client_t *c[2] = {client_open(&a[0]), client_open(&a[1])};
    for (int i = 0; i < 20; i++) {
        resp_t r;
        char v[64];
        roundtrip(c[i % 2], GET("/hello"), &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(hdr(&r, "server", v, sizeof v), i % 2 ? "second/2" : "first/1");
        resp_free(&r);
    }
    for (int i = 0; i < 2; i++) {
        client_close(c[i]);
        ck_assert_int_eq(sp_http_server_stop(srv[i], 1000000), 0);
    }
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    for (int i = 0; i < 2; i++)
        sp_http_server_destroy(srv[i]);
    sp_iomanager_destroy(io);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("http_server");
    ADD_CASE(s, "server", setup_default, server_stop, get_has_length_date_server,
             router_exact_prefix_glob, router_405_with_allow, router_default_handler,
             thousand_concurrent_keepalive_clients, stats_count_a_known_load,
             two_servers_keep_their_names);
    ADD_CASE(s, "access_log", setup_access_log, server_stop, access_log_line_per_request);
    ADD_CASE(s, "stop", setup_default, NULL, stop_closes_idle_keepalive_at_once,
             stop_during_handler_answers_connection_close);
    ADD_CASE(s, "program", NULL, NULL, httpd_with_curl, httpd_with_python_http_client,
             httpd_ws_echo_with_python,
             httpd_rejects_bad_numbers, server_name_without_control_bytes);
    return sp_test_run(s);
}
