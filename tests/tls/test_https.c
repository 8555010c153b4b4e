/* The HTTP server over TLS (sp_http_server_opts_t.tls): the same handlers
 * serve HTTPS. curl with the test CA: a GET, two requests on one kept-alive
 * connection, a static file whole and by Range; Python's ssl + http.client
 * for a large file; two pipelined requests in one TLS write; three TLS
 * records in one TCP send (read ahead into OpenSSL); a WebSocket
 * endpoint over TLS (wss, Python's websockets); a client that speaks plain
 * HTTP to the TLS port is dropped while the server serves on; a config
 * with ktls serves the static file the same. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/websocket.h>

#include "testutil.h"
#include "tls_fixture.h"

enum { BIG = 300000 };

static sp_iomanager_t *io;
static sp_http_server_t *srv;
static sp_http_router_t *routes;
static sp_http_static_t *files;
static sp_tls_config_t *cfg;
static int port;
static char root[64];

static int hello(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    sp_http_response_set_header(res, "Content-Type", "text/plain");
    return sp_http_response_set_body(res, "Hello, World!", 13);
}

static void echo_ws(sp_ws_t *ws, void *arg)
{
    (void)arg;
    sp_ws_msg_t m;
    while (sp_ws_recv(ws, &m, -1) == 0)
        if (sp_ws_send(ws, m.type, m.data, m.len) < 0)
            break;
}

/* A file of BIG bytes, each its offset's low byte. */
static void make_root(void)
{
    snprintf(root, sizeof root, "/tmp/sp_https_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    char path[96];
    snprintf(path, sizeof path, "%s/big.bin", root);
    unsigned char *b = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        b[i] = (unsigned char)i;
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ck_assert_int_eq(write(fd, b, BIG), BIG);
    close(fd);
    free(b);
}

static void start_with(bool ktls)
{
    make_root();
    sp_tls_cert_t certs[1];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, (const char *const[]){"a"}, 1);
    o.ktls = ktls;
    ck_assert_ptr_nonnull(cfg = sp_tls_server_config(&o));
    routes = sp_http_router_create();
    ck_assert_int_eq(sp_http_router_add(routes, SP_HTTP_EXACT, "/plaintext", SP_HTTP_M_GET, hello,
                                        NULL),
                     0);
    ck_assert_int_eq(sp_http_router_add_ws(routes, "/ws", NULL, echo_ws, NULL), 0);
    ck_assert_ptr_nonnull(files = sp_http_static_create(root, NULL));
    sp_http_router_set_default(routes, sp_http_static_handler, files);
    io = sp_iomanager_create("https", 2, false);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    sp_http_server_opts_t so = {.tls = cfg};
    ck_assert_ptr_nonnull(srv = sp_http_server_create(io, sp_http_router_dispatch, routes, &so));
    sp_addr_t a;
    ck_assert_int_eq(sp_addr_parse("127.0.0.1:0", &a), 0);
    ck_assert_int_eq(sp_http_server_listen(srv, &a), 0);
    ck_assert_int_eq(sp_http_server_start(srv), 0);
    ck_assert_int_eq(sp_http_server_addr(srv, 0, &a), 0);
    port = sp_addr_port(&a);
}

static void start(void)
{
    start_with(false);
}

static void stop(void)
{
    sp_http_server_stop(srv, 1000000);
    sp_iomanager_stop(io);
    sp_http_server_destroy(srv);
    sp_iomanager_destroy(io);
    sp_http_router_destroy(routes);
    sp_http_static_destroy(files);
    sp_tls_config_free(cfg);
    char path[96];
    snprintf(path, sizeof path, "%s/big.bin", root);
    unlink(path);
    rmdir(root);
}

/* curl against the server as a.test, trusting ca1; its output. */
static int curl(const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 20 --resolve a.test:%d:127.0.0.1 --cacert %s %s", port,
             tls_file("ca1.pem"), args);
    return tls_run(cmd, out, size);
}

START_TEST(curl_get_keepalive_and_range)
{
    start();
    char out[4096], args[256];
    snprintf(args, sizeof args, "https://a.test:%d/plaintext", port);
    ck_assert_int_eq(curl(args, out, sizeof out), 0);
    ck_assert_str_eq(out, "Hello, World!");
    /* Two URLs: one connection, kept alive (curl says how many it made). */
    snprintf(args, sizeof args,
             "-w ' %%{num_connects}' https://a.test:%d/plaintext https://a.test:%d/plaintext",
             port, port);
    ck_assert_int_eq(curl(args, out, sizeof out), 0);
    ck_assert_str_eq(out, "Hello, World! 1Hello, World! 0");
    /* A range of the file (the sendfile path, here over TLS). */
    snprintf(args, sizeof args, "-r 1000-1009 https://a.test:%d/big.bin | od -An -tu1", port);
    ck_assert_int_eq(curl(args, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "232 233 234 235 236 237 238 239 240 241"));
    stop();
}
END_TEST

/* Python: the whole file through http.client; two pipelined requests in
 * one write; a WebSocket message over TLS. */
START_TEST(python_file_pipelining_and_wss)
{
    start();
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %d %s %d", SP_HTTPS_CLIENT_PY, port,
             tls_file("ca1.pem"), BIG);
    ck_assert_int_eq(tls_run(cmd, out, sizeof out), 0);
    ck_assert_ptr_nonnull(strstr(out, "file 300000 True"));
    ck_assert_ptr_nonnull(strstr(out, "pipelined 2"));
    ck_assert_ptr_nonnull(strstr(out, "records 3"));
    ck_assert_ptr_nonnull(strstr(out, "wss over tls"));
    stop();
}
END_TEST

/* curl's download of url into root/got.bin equals big.bin's bytes from off. */
static void curl_matches(const char *range, size_t off, size_t len)
{
    char out[4096], args[512], got[96];
    snprintf(got, sizeof got, "%s/got.bin", root);
    snprintf(args, sizeof args, "%s -o %s https://a.test:%d/big.bin", range, got, port);
    ck_assert_int_eq(curl(args, out, sizeof out), 0);
    unsigned char *b = malloc(BIG + 1);
    int fd = open(got, O_RDONLY | O_CLOEXEC);
    ck_assert_int_eq(read(fd, b, BIG + 1), (ssize_t)len);
    close(fd);
    unlink(got);
    for (size_t i = 0; i < len; i++)
        ck_assert_int_eq(b[i], (unsigned char)(off + i));
    free(b);
}

/* A server whose TLS config asks for kernel TLS: the static file whole
 * and by Range, byte for byte (kernel TLS where the kernel has it, else
 * the same pieces through OpenSSL). */
START_TEST(ktls_static_file_and_range)
{
    start_with(true);
    curl_matches("", 0, BIG);
    curl_matches("-r 4097-254096", 4097, 250000);
    stop();
}
END_TEST

/* Plain HTTP to the TLS port: no answer in clear, and the server serves on. */
START_TEST(plain_http_to_the_tls_port_is_dropped)
{
    start();
    char out[4096], args[256];
    snprintf(args, sizeof args, "http://a.test:%d/plaintext; echo rc=$?", port);
    curl(args, out, sizeof out);
    ck_assert_ptr_null(strstr(out, "Hello, World!"));
    snprintf(args, sizeof args, "https://a.test:%d/plaintext", port);
    ck_assert_int_eq(curl(args, out, sizeof out), 0);
    ck_assert_str_eq(out, "Hello, World!");
    stop();
}
END_TEST

int main(void)
{
    tls_certs_make();
    Suite *s = suite_create("https");
    SP_TEST_CASE(s, "https", 120, NULL, NULL, curl_get_keepalive_and_range,
                 python_file_pipelining_and_wss, plain_http_to_the_tls_port_is_dropped,
                 ktls_static_file_and_range);
    return tls_suite_run(s);
}
