/* The HTTP and WebSocket clients over TLS (https://, wss://) against the
 * HTTP server over TLS (certificates of make_certs.sh: a.pem names a.test
 * and 127.0.0.1, signed by ca1): requests and bodies, one kept-alive TLS
 * connection for several requests, the pool telling http:// from
 * https://, certificate and name verification, the insecure mode, plain
 * HTTP to the TLS port and TLS to a plain port, the handshake inside the
 * connect timeout, clients shared by fibers, WebSocket echo over TLS
 * with our server and with Python's websockets (tests/http/ws_peer.py). */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/websocket.h>

#include "real_server.h"
#include "testutil.h"
#include "tls_fixture.h"

static sp_iomanager_t *io;
static sp_http_server_t *srv, *plain; /* the same routes over TLS and not */
static sp_http_router_t *routes;
static sp_tls_config_t *scfg;
static int port, plain_port;

static int hello(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    return sp_http_response_set_body(res, "Hello, TLS", 10);
}

static int echo(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)arg;
    size_t n;
    const void *b = sp_http_request_body(req, &n);
    sp_http_response_set_status(res, 201);
    return sp_http_response_set_body(res, b, n);
}

static void echo_ws(sp_ws_t *ws, void *arg)
{
    (void)arg;
    sp_ws_msg_t m;
    while (sp_ws_recv(ws, &m, -1) == 0)
        if (sp_ws_send(ws, m.type, m.data, m.len) < 0)
            break;
}

static sp_http_server_t *serve(const sp_http_server_opts_t *so, int *p)
{
    sp_http_server_t *s = sp_http_server_create(io, sp_http_router_dispatch, routes, so);
    ck_assert_ptr_nonnull(s);
    sp_addr_t a;
    ck_assert_int_eq(sp_addr_parse("127.0.0.1:0", &a), 0);
    ck_assert_int_eq(sp_http_server_listen(s, &a), 0);
    ck_assert_int_eq(sp_http_server_start(s), 0);
    ck_assert_int_eq(sp_http_server_addr(s, 0, &a), 0);
    *p = sp_addr_port(&a);
    return s;
}

/* The servers, the TLS one with cert_file and key_file. */
static void start_with(const char *cert_file, const char *key_file)
{
    sp_tls_cert_t cert = {cert_file, key_file};
    sp_tls_server_opts_t o = {.certs = &cert, .ncerts = 1};
    ck_assert_ptr_nonnull(scfg = sp_tls_server_config(&o));
    routes = sp_http_router_create();
    ck_assert_int_eq(sp_http_router_add(routes, SP_HTTP_EXACT, "/hello", SP_HTTP_M_GET, hello,
                                        NULL),
                     0);
    ck_assert_int_eq(sp_http_router_add(routes, SP_HTTP_EXACT, "/echo", SP_HTTP_M_POST, echo,
                                        NULL),
                     0);
    ck_assert_int_eq(sp_http_router_add_ws(routes, "/ws", NULL, echo_ws, NULL), 0);
    io = sp_iomanager_create("https-client", 2, false);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    srv = serve(&(sp_http_server_opts_t){.tls = scfg}, &port);
    plain = serve(NULL, &plain_port);
}

static void start(void)
{
    start_with(tls_file("a.pem"), tls_file("a.key"));
}

static void stop(void)
{
    sp_http_server_stop(srv, 1000000);
    sp_http_server_stop(plain, 1000000);
    sp_iomanager_stop(io);
    sp_http_server_destroy(srv);
    sp_http_server_destroy(plain);
    sp_iomanager_destroy(io);
    sp_http_router_destroy(routes);
    sp_tls_config_free(scfg);
}

static sp_tls_config_t *client_config(const char *ca_file, bool insecure)
{
    sp_tls_client_opts_t o = {.ca_file = ca_file, .insecure = insecure};
    sp_tls_config_t *cfg = sp_tls_client_config(&o);
    ck_assert_msg(cfg, "%s (%s)", strerror(errno), sp_tls_error_reason());
    return cfg;
}

/* A URL by value (no shared buffer: fibers on several threads make
 * theirs at once); url(...).s lives to the end of the full expression. */
typedef struct url {
    char s[128];
} url_t;

static url_t url(const char *scheme, int p, const char *path)
{
    url_t u;
    snprintf(u.s, sizeof u.s, "%s://127.0.0.1:%d%s", scheme, p, path);
    return u;
}

static uint64_t tls_connections(void)
{
    sp_http_server_stats_t st;
    ck_assert_int_eq(sp_http_server_stats(srv, &st), 0);
    return st.connections;
}

/* A GET's result; on success the status and body are checked. */
static int get(sp_http_client_t *cl, const char *u)
{
    sp_http_client_response_t *r;
    int rc = sp_http_get(cl, u, &r);
    if (rc == 0) {
        size_t n;
        const char *b = sp_http_client_response_body(r, &n);
        ck_assert_int_eq(sp_http_client_response_status(r), 200);
        ck_assert_int_eq(n, 10);
        ck_assert_int_eq(memcmp(b, "Hello, TLS", 10), 0);
        sp_http_client_response_free(r);
    }
    return rc;
}

/* One GET to the TLS server by a new client trusting ca_file, or
 * anything when insecure; with neither, the default config. */
static int get_once(const char *ca_file, bool insecure)
{
    sp_tls_config_t *cfg = ca_file || insecure ? client_config(ca_file, insecure) : NULL;
    sp_http_client_t *cl = sp_http_client_create(&(sp_http_client_opts_t){.tls = cfg});
    int rc = get(cl, url("https", port, "/hello").s);
    sp_http_client_destroy(cl);
    sp_tls_config_free(cfg);
    return rc;
}

START_TEST(https_get_post_on_one_connection)
{
    start();
    sp_tls_config_t *cfg = client_config(tls_file("ca1.pem"), false);
    sp_http_client_t *cl = sp_http_client_create(&(sp_http_client_opts_t){.tls = cfg});
    ck_assert_int_eq(get(cl, url("https", port, "/hello").s), 0);
    /* A body over TLS, bigger than one TLS record (16 KiB). */
    enum { BODY = 40000 };
    char *body = malloc(BODY);
    for (int i = 0; i < BODY; i++)
        body[i] = (char)('a' + i % 26);
    sp_http_client_response_t *r;
    ck_assert_int_eq(sp_http_post(cl, url("https", port, "/echo").s, "text/plain", body, BODY, &r),
                     0);
    size_t n;
    const char *b = sp_http_client_response_body(r, &n);
    ck_assert_int_eq(sp_http_client_response_status(r), 201);
    ck_assert_int_eq(n, BODY);
    ck_assert_int_eq(memcmp(b, body, BODY), 0);
    sp_http_client_response_free(r);
    free(body);
    ck_assert_int_eq(get(cl, url("https", port, "/hello").s), 0);
    /* Three requests, one TLS connection: kept alive in the pool. */
    ck_assert_uint_eq(tls_connections(), 1);
    sp_http_client_destroy(cl);
    sp_tls_config_free(cfg);
    stop();
}
END_TEST

/* http://h:p and https://h:p are different pools: a plain connection in
 * the pool is not taken for https://. Plain HTTP to the TLS port fails
 * (the server serves on), TLS to a plain port fails the handshake. */
START_TEST(https_pool_keys_on_the_scheme)
{
    start();
    sp_tls_config_t *cfg = client_config(tls_file("ca1.pem"), false);
    sp_http_client_t *cl = sp_http_client_create(&(sp_http_client_opts_t){
        .tls = cfg, .timeout_us = 10000000, .connect_timeout_us = 10000000});
    ck_assert_int_eq(get(cl, url("http", plain_port, "/hello").s), 0); /* pooled */
    ck_assert_int_eq(get(cl, url("https", plain_port, "/hello").s), SP_TLS_EHANDSHAKE);
    int rc = get(cl, url("http", port, "/hello").s);
    ck_assert_msg(rc < 0 && rc != -ETIMEDOUT, "plain HTTP to the TLS port: %d", rc);
    ck_assert_int_eq(get(cl, url("https", port, "/hello").s), 0); /* pooled */
    ck_assert_int_eq(get(cl, url("http", plain_port, "/hello").s), 0);
    ck_assert_int_eq(get(cl, url("https", port, "/hello").s), 0);
    ck_assert_uint_eq(tls_connections(), 2); /* the plain request's and one TLS */
    sp_http_client_destroy(cl);
    sp_tls_config_free(cfg);
    stop();
}
END_TEST

/* Verification is on by default: the system store does not know ca1, ca2
 * did not sign a.pem; the insecure config takes any certificate. */
START_TEST(https_verifies_the_certificate)
{
    start();
    ck_assert_int_eq(get_once(NULL, false), SP_TLS_EVERIFY);
    ck_assert_str_ne(sp_tls_error_reason(), "");
    ck_assert_int_eq(get_once(tls_file("ca2.pem"), false), SP_TLS_EVERIFY);
    ck_assert_int_eq(get_once(NULL, true), 0);
    stop();
}
END_TEST

/* A trusted certificate (self-signed, made here) that names "localhost"
 * only: https://127.0.0.1 is refused, as the URL's host is not in it. */
START_TEST(https_checks_the_host_name)
{
    char cmd[1024], out[2048];
    const char *cert = tls_file("localhost.pem"), *key = tls_file("localhost.key");
    snprintf(cmd, sizeof cmd,
             "%s req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
             "-subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout %s -out %s",
             SP_OPENSSL, key, cert);
    ck_assert_msg(tls_run(cmd, out, sizeof out) == 0, "%s", out);
    start_with(cert, key);
    ck_assert_int_eq(get_once(cert, false), SP_TLS_EVERIFY);
    ck_assert_msg(strstr(sp_tls_error_reason(), "mismatch"), "%s", sp_tls_error_reason());
    ck_assert_int_eq(get_once(NULL, true), 0);
    stop();
}
END_TEST

/* A server that takes the connection (the kernel's backlog) and never
 * answers the ClientHello: connect_timeout_us covers the handshake. */
START_TEST(https_handshake_within_connect_timeout)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(l, 4), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
    sp_tls_config_t *any = client_config(NULL, true);
    sp_http_client_t *cl = sp_http_client_create(&(sp_http_client_opts_t){
        .tls = any, .connect_timeout_us = 200000, .timeout_us = 60000000});
    ck_assert_int_eq(get(cl, url("https", ntohs(a.sin_port), "/").s), -ETIMEDOUT);
    sp_http_client_destroy(cl);
    sp_tls_config_free(any);
    close(l);
}
END_TEST

/* ---- clients shared by fibers ------------------------------------------- */

enum { FIBERS = 16, ROUNDS = 4 };
static sp_http_client_t *shared;
static _Atomic int ok, refused;

static void trusting_fiber(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++)
        if (get(shared, url("https", port, "/hello").s) == 0)
            atomic_fetch_add(&ok, 1);
}

/* With the default config, made by whichever fiber comes first. */
static void default_fiber(void *arg)
{
    (void)arg;
    if (get(shared, url("https", port, "/hello").s) == SP_TLS_EVERIFY)
        atomic_fetch_add(&refused, 1);
}

static void run_fibers(void (*fn)(void *))
{
    sp_iomanager_t *cio = sp_iomanager_create("clients", 2, false);
    ck_assert_int_eq(sp_iomanager_start(cio), 0);
    for (int i = 0; i < FIBERS; i++)
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(cio), fn, NULL, SP_ANY_WORKER), 0);
    ck_assert_int_eq(sp_iomanager_stop(cio), 0);
    sp_iomanager_destroy(cio);
}

START_TEST(https_client_shared_by_fibers)
{
    start();
    sp_tls_config_t *cfg = client_config(tls_file("ca1.pem"), false);
    shared = sp_http_client_create(&(sp_http_client_opts_t){.tls = cfg});
    run_fibers(trusting_fiber);
    ck_assert_int_eq(atomic_load(&ok), FIBERS * ROUNDS);
    /* Each fiber's connection, kept and reused: no more than FIBERS. */
    ck_assert_uint_le(tls_connections(), FIBERS);
    sp_http_client_destroy(shared);
    sp_tls_config_free(cfg);
    shared = sp_http_client_create(NULL);
    run_fibers(default_fiber);
    ck_assert_int_eq(atomic_load(&refused), FIBERS);
    sp_http_client_destroy(shared);
    stop();
}
END_TEST

/* ---- WebSocket ------------------------------------------------------------ */

static void ws_echo_once(sp_ws_t *ws, sp_ws_type_t type, const void *data, size_t len)
{
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_send(ws, type, data, len), 0);
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), 0);
    ck_assert_int_eq(m.type, type);
    ck_assert_uint_eq(m.len, len);
    ck_assert_int_eq(memcmp(m.data, data, len), 0);
}

START_TEST(wss_echo)
{
    start();
    sp_tls_config_t *cfg = client_config(tls_file("ca1.pem"), false);
    sp_ws_opts_t o = {.tls = cfg};
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(url("wss", port, "/ws").s, &o, &ws), 0);
    ws_echo_once(ws, SP_WS_TEXT, "over tls", 8);
    enum { BIG = 100000 }; /* several TLS records */
    unsigned char *big = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        big[i] = (unsigned char)i;
    ws_echo_once(ws, SP_WS_BINARY, big, BIG);
    free(big);
    ck_assert_int_eq(sp_ws_close(ws, SP_WS_NORMAL, "bye"), 0);
    ck_assert_int_eq(sp_ws_close_code(ws, NULL), SP_WS_NORMAL);
    sp_ws_free(ws);
    /* The default config does not trust ca1; ws:// to the TLS port and
     * wss:// to the plain one fail. */
    ck_assert_int_eq(sp_ws_connect(url("wss", port, "/ws").s, NULL, &ws), SP_TLS_EVERIFY);
    int rc = sp_ws_connect(url("ws", port, "/ws").s, &o, &ws);
    ck_assert_msg(rc < 0 && rc != -ETIMEDOUT, "ws:// to the TLS port: %d", rc);
    ck_assert_int_eq(sp_ws_connect(url("wss", plain_port, "/ws").s, &o, &ws), SP_TLS_EHANDSHAKE);
    sp_tls_config_free(cfg);
    stop();
}
END_TEST

/* ---- Python's websockets over TLS ----------------------------------------- */

static rs_server_t py;
static int py_port;

static bool py_spawn(int p)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", p);
    char *argv[] = {"/usr/bin/python3", WS_PEER_PY, "tls-server", ps,
                    (char *)tls_file("a.pem"), (char *)tls_file("a.key"), NULL};
    return rs_start(&py, argv, "ready", 20000);
}

/* Unchecked fixture, in Check's parent process: the Python server. */
static void py_start(void)
{
    py.pid = -1;
    py_port = rs_start_on_free_port(&py, py_spawn);
}

static void py_stop(void)
{
    rs_stop(&py);
}

START_TEST(wss_against_python_websockets)
{
    ck_assert_msg(py.pid > 0, "%s", py.error);
    sp_tls_config_t *cfg = client_config(tls_file("ca1.pem"), false);
    sp_ws_opts_t o = {.tls = cfg};
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(url("wss", py_port, "/").s, &o, &ws), 0);
    ws_echo_once(ws, SP_WS_TEXT, "hello over tls", 14);
    enum { BIG = 300000 };
    unsigned char *big = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        big[i] = (unsigned char)(i * 7);
    ws_echo_once(ws, SP_WS_BINARY, big, BIG);
    free(big);
    ck_assert_int_eq(sp_ws_ping(ws, "hb", 2), 0);
    ws_echo_once(ws, SP_WS_TEXT, "after the ping", 14);
    ck_assert_uint_eq(sp_ws_pongs(ws), 1);
    ws_echo_once(ws, SP_WS_TEXT, "", 0);
    ck_assert_int_eq(sp_ws_close(ws, SP_WS_NORMAL, "done"), 0);
    ck_assert_int_eq(sp_ws_close_code(ws, NULL), SP_WS_NORMAL);
    sp_ws_free(ws);
    sp_tls_config_free(cfg);
}
END_TEST

int main(void)
{
    tls_certs_make();
    Suite *s = suite_create("https_client");
    SP_TEST_CASE(s, "https_client", 120, NULL, NULL, https_get_post_on_one_connection,
                 https_pool_keys_on_the_scheme, https_verifies_the_certificate,
                 https_checks_the_host_name, https_handshake_within_connect_timeout,
                 https_client_shared_by_fibers, wss_echo);
    TCase *python = SP_TEST_CASE(s, "python", 60, NULL, NULL, wss_against_python_websockets);
    tcase_add_unchecked_fixture(python, py_start, py_stop);
    return tls_suite_run(s);
}
