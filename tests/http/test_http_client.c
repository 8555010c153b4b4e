/* HTTP client: against the in-process server (pool, errors, timeouts), raw
 * scripted servers on a plain thread (bodiless answers, 101, request lines,
 * no replayed POST, early answers, non-HTTP/1 answers), shared by fibers,
 * and against nginx where it is installed. */
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
    ck_assert_int_eq(sp_http_get(cl, "httpx://127.0.0.1/x", &r), -EPROTONOSUPPORT);
    ck_assert_int_eq(sp_http_get(cl, "ws://127.0.0.1/x", &r), -EPROTONOSUPPORT);
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
    sp_http_client_opts_t o = {.timeout_us = 200000};
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
    sp_http_client_opts_t o = {.timeout_us = 2000000};
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
    Suite *s = http_suite("http_client");
    ADD_CASE(s, "client", setup_default, server_stop, client_requests_and_pool, client_errors,
             client_read_timeout, client_replaces_closed_pooled_connection,
             client_bodiless_answers, client_101_connection_not_reused,
             client_request_line_and_headers, client_post_not_replayed,
             client_reads_early_answer, client_refuses_non_http1_answers,
             client_shared_by_fibers);
    ADD_CASE(s, "nginx", NULL, NULL, client_against_nginx);
    return sp_test_run(s);
}
