/* Kernel TLS (ktls in the options) and sp_tls_sendfile, against Python's
 * ssl module and `openssl s_client`, on the in-process echo server
 * (tls_fixture.c). Where the kernel has no TLS (ENOENT for the "tls"
 * ULP) the connections run on OpenSSL's socket BIO and send files in
 * pieces through OpenSSL; where it has, the same tests run the
 * SSL_sendfile path. Each test prints which path it ran. The stalled
 * handshake with ktls on is in test_tls_server. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spindle/log.h>
#include <spindle/tls.h>

#include "testutil.h"
#include "tls_fixture.h"

enum { BIG = 300000 };

static tls_server_t S;
static char dir[128], path[192];

/* A blocking socket connected to a loopback listener (in *l) that never
 * accepts: the TCP connection is made, nobody answers. */
static int connect_to_nobody(int *l)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    *l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(bind(*l, (struct sockaddr *)&a, n), 0);
    ck_assert_int_eq(listen(*l, 1), 0);
    ck_assert_int_eq(getsockname(*l, (struct sockaddr *)&a, &n), 0);
    ck_assert_int_eq(connect(c, (struct sockaddr *)&a, n), 0);
    return c;
}

/* The kernel's answer, asked here as the library asks it: a connected
 * loopback socket takes the "tls" ULP or not. */
static bool kernel_has_tls(void)
{
    int l, c = connect_to_nobody(&l);
    bool ok = setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") == 0;
    close(c);
    close(l);
    return ok;
}

/* A file of BIG bytes (a pattern that does not repeat every 256), open as
 * the server's file. */
static void start(bool ktls)
{
    sp_test_make_dir(dir, sizeof dir, "sp-ktls");
    snprintf(path, sizeof path, "%s/big.bin", dir);
    unsigned char *b = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        b[i] = (unsigned char)(i * 7 + i / 256);
    int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    ck_assert_int_eq(write(fd, b, BIG), BIG);
    free(b);
    static const char *const names[] = {"a"};
    sp_tls_cert_t certs[1];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, names, 1);
    o.ktls = ktls;
    tls_server_start(&S, &o, 2);
    tls_server_set(&S, fd, 0);
}

static void stop(void)
{
    tls_server_stop(&S);
    close(S.file_fd);
    sp_test_remove_dir(dir);
}

static void python(const char *args, char *out, size_t size)
{
    tls_python(&S, args, out, size);
}

static ssize_t file_rc(void)
{
    pthread_mutex_lock(&S.lock);
    ssize_t rc = S.file_rc;
    pthread_mutex_unlock(&S.lock);
    return rc;
}

/* The connections so far sent with kernel TLS (or none did); says which. */
static void check_path(int conns, const char *what)
{
    ck_assert(tls_server_wait(&S, conns, 30000));
    pthread_mutex_lock(&S.lock);
    int k = S.ktls_sends;
    pthread_mutex_unlock(&S.lock);
    printf("%s: %s\n", what,
           k ? "kernel TLS, SSL_sendfile" : "no kernel TLS, read + write in OpenSSL");
    if (!kernel_has_tls())
        ck_assert_int_eq(k, 0);
}

static char logged[4096];
static size_t nlogged;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void sink(const char *line, size_t len, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&log_lock);
    if (nlogged + len < sizeof logged) {
        memcpy(logged + nlogged, line, len);
        nlogged += len;
    }
    pthread_mutex_unlock(&log_lock);
}

/* The first ktls config says on "spindle.tls" what the kernel offers;
 * later ones say nothing more, configs without ktls nothing at all. */
START_TEST(a_ktls_config_logs_once_whether_the_kernel_has_tls)
{
    sp_log_appender_t *a = sp_log_callback(sink, NULL, "%p %m%n");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(sp_logger_set_appenders(sp_logger("spindle.tls"), &a, 1), 0);
    static const char *const names[] = {"a"};
    sp_tls_cert_t certs[1];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, names, 1);
    sp_tls_config_t *plain = sp_tls_server_config(&o);
    ck_assert_ptr_nonnull(plain);
    ck_assert_int_eq(sp_log_flush(), 0);
    ck_assert_int_eq(nlogged, 0);
    o.ktls = true;
    sp_tls_config_t *k1 = sp_tls_server_config(&o);
    sp_tls_client_opts_t co = {.ktls = true, .insecure = true};
    sp_tls_config_t *k2 = sp_tls_client_config(&co);
    ck_assert(k1 && k2);
    ck_assert_int_eq(sp_log_flush(), 0);
    const char *want = kernel_has_tls()
                           ? "INFO kTLS: on (kernel TLS ULP available)\n"
                           : "WARN kTLS requested but unavailable: No such file or directory "
                             "(files go through OpenSSL)\n";
    pthread_mutex_lock(&log_lock);
    logged[nlogged] = '\0';
    pthread_mutex_unlock(&log_lock);
    ck_assert_str_eq(logged, want);
    printf("logged: %s", logged);
    sp_tls_config_free(plain);
    sp_tls_config_free(k1);
    sp_tls_config_free(k2);
    sp_log_appender_release(a);
}
END_TEST

/* A client connection to S from this (plain) thread, trusting ca1; with
 * `small`, 4 KiB socket buffers. Its config in *cfg, its socket in *fd. */
static sp_tls_conn_t *client(bool ktls, bool small, sp_tls_config_t **cfg, int *fd)
{
    sp_tls_client_opts_t co = {.ca_file = tls_file("ca1.pem"), .ktls = ktls};
    ck_assert_ptr_nonnull(*cfg = sp_tls_client_config(&co));
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    for (int opt = SO_SNDBUF; small && opt; opt = opt == SO_SNDBUF ? SO_RCVBUF : 0)
        ck_assert_int_eq(setsockopt(*fd, SOL_SOCKET, opt, &(int){4096}, sizeof(int)), 0);
    ck_assert_int_eq(connect(*fd, (const struct sockaddr *)&S.addr.ss, S.addr.len), 0);
    sp_tls_conn_t *c;
    ck_assert_int_eq(sp_tls_connect(*cfg, *fd, "a.test", 0, &c), 0);
    return c;
}

static void client_end(sp_tls_conn_t *c, sp_tls_config_t *cfg, int fd)
{
    sp_tls_free(c);
    close(fd);
    sp_tls_config_free(cfg);
}

START_TEST(handshake_and_echo_with_ktls)
{
    start(true);
    char out[4096];
    python("--tls 1.3", out, sizeof out);
    tls_has(out, "version=TLSv1.3\n");
    tls_has(out, "echo=ok\n");
    python("--tls 1.2 --resume", out, sizeof out);
    tls_has(out, "version=TLSv1.2\n");
    tls_has(out, "echo=ok\n");
    tls_has(out, "reused=1\n");
    check_path(3, "echo");
    stop();
}
END_TEST

/* The whole file and a range from an odd offset arrive byte for byte,
 * with ktls off (_i 0) and on (_i 1). */
START_TEST(sendfile_to_python_whole_and_range)
{
    start(_i);
    char args[512], out[4096];
    snprintf(args, sizeof args, "--file 0 %d %s", BIG, path);
    python(args, out, sizeof out);
    tls_has(out, "echo=ok\n");
    tls_has(out, "file=300000 match=True\n");
    ck_assert_int_eq(file_rc(), BIG);
    snprintf(args, sizeof args, "--tls 1.2 --file 12345 250001 %s", path);
    python(args, out, sizeof out);
    tls_has(out, "file=250001 match=True\n");
    ck_assert_int_eq(file_rc(), 250001);
    check_path(2, _i ? "sendfile, ktls requested" : "sendfile, ktls off");
    stop();
}
END_TEST

/* openssl s_client reads a range into a file: the same bytes. */
START_TEST(sendfile_to_openssl_s_client)
{
    start(true);
    char got[192], cmd[1024], out[4096];
    snprintf(got, sizeof got, "%s/got.bin", dir);
    snprintf(cmd, sizeof cmd,
             "sh -c 'echo \"?file 4097 280000\" | %s s_client -connect 127.0.0.1:%d -CAfile %s "
             "-servername a.test -verify_return_error -quiet > %s'",
             SP_OPENSSL, S.port, tls_file("ca1.pem"), got);
    int rc = tls_run(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "%s: exit %d:\n%s", cmd, rc, out);
    ck_assert(tls_server_wait(&S, 1, 30000));
    ck_assert_int_eq(file_rc(), 280000);
    int fd = open(got, O_RDONLY | O_CLOEXEC);
    unsigned char *b = malloc(BIG), *w = malloc(BIG);
    ck_assert_int_eq(read(fd, b, BIG), 280000);
    ck_assert_int_eq(pread(S.file_fd, w, 280000, 4097), 280000);
    ck_assert(memcmp(b, w, 280000) == 0);
    free(b);
    free(w);
    close(fd);
    check_path(1, "s_client");
    stop();
}
END_TEST

/* 4 KiB socket buffers at both ends: the server's sends meet a full
 * socket again and again and wait (WANT_WRITE) between them; the bytes
 * arrive whole, ktls off (_i 0) and on (_i 1). */
START_TEST(sendfile_through_small_socket_buffers)
{
    start(_i);
    tls_server_set(&S, S.file_fd, 4096);
    sp_tls_config_t *cfg;
    int fd;
    sp_tls_conn_t *c = client(false, true, &cfg, &fd);
    const char req[] = "?file 1 299999";
    ck_assert_int_eq(sp_tls_write(c, req, sizeof req - 1, 5000000), (ssize_t)sizeof req - 1);
    unsigned char *got = malloc(BIG), *want = malloc(BIG);
    size_t n = 0;
    ssize_t r;
    while ((r = sp_tls_read(c, got + n, BIG - n, 10000000)) > 0)
        n += (size_t)r;
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(n, 299999);
    ck_assert_int_eq(pread(S.file_fd, want, n, 1), (ssize_t)n);
    ck_assert(memcmp(got, want, n) == 0);
    free(got);
    free(want);
    client_end(c, cfg, fd);
    ck_assert_int_eq(file_rc(), 299999);
    check_path(1, _i ? "small buffers, ktls requested" : "small buffers, ktls off");
    stop();
}
END_TEST

/* A ktls client whose write times out (the echo server's answers are
 * never read, so it stops reading): no close_notify may follow, since
 * OpenSSL would finish the half-sent record from the caller's buffer. */
START_TEST(after_a_failed_ktls_write_shutdown_sends_nothing)
{
    start(true);
    tls_server_set(&S, S.file_fd, 4096);
    sp_tls_config_t *cfg;
    int fd;
    sp_tls_conn_t *c = client(true, true, &cfg, &fd);
    enum { LOT = 4 << 20 };
    char *lot = calloc(1, LOT);
    ck_assert_int_eq(sp_tls_write(c, lot, LOT, 300000), -ETIMEDOUT);
    ck_assert_int_eq(sp_tls_shutdown(c, 100000), -ENOTCONN);
    free(lot);
    client_end(c, cfg, fd);
    stop();
}
END_TEST

/* A range past the end of the file: what there is, then -EIO. */
START_TEST(sendfile_of_a_file_that_ends_early_fails_with_eio)
{
    start(true);
    char args[512], out[4096];
    snprintf(args, sizeof args, "--file %d 5000 %s", BIG - 1000, path);
    python(args, out, sizeof out);
    tls_has(out, "file=1000 match=True\n");
    ck_assert_int_eq(file_rc(), -EIO);
    stop();
}
END_TEST

/* A ktls client on a plain thread over a blocking socket: the waits are
 * still the call's own (poll, with the deadline), not a blocking read. */
START_TEST(a_ktls_client_on_a_plain_thread_keeps_its_deadline)
{
    start(true);
    sp_tls_config_t *cfg;
    int fd;
    sp_tls_conn_t *c = client(true, false, &cfg, &fd);
    ck_assert_int_eq(sp_tls_write(c, "ping\n", 5, 5000000), 5);
    char buf[16];
    ck_assert_int_eq(sp_tls_read(c, buf, sizeof buf, 5000000), 5);
    ck_assert(memcmp(buf, "ping\n", 5) == 0);
    if (!kernel_has_tls())
        ck_assert(!sp_tls_ktls_send(c));
    sp_tls_shutdown(c, 1000000);
    sp_tls_free(c);
    close(fd);
    /* A server that never answers. */
    int l;
    fd = connect_to_nobody(&l);
    ck_assert_int_eq(sp_tls_connect(cfg, fd, "a.test", 300000, &c), -ETIMEDOUT);
    close(fd);
    close(l);
    sp_tls_config_free(cfg);
    stop();
}
END_TEST

int main(void)
{
    tls_certs_make();
    Suite *s = suite_create("tls_ktls");
    SP_TEST_CASE(s, "log", 60, NULL, NULL, a_ktls_config_logs_once_whether_the_kernel_has_tls);
    TCase *tc = SP_TEST_CASE(s, "ktls", 120, NULL, NULL, handshake_and_echo_with_ktls,
                             sendfile_to_openssl_s_client,
                             sendfile_of_a_file_that_ends_early_fails_with_eio,
                             a_ktls_client_on_a_plain_thread_keeps_its_deadline,
                             after_a_failed_ktls_write_shutdown_sends_nothing);
    tcase_add_loop_test(tc, sendfile_to_python_whole_and_range, 0, 2);
    tcase_add_loop_test(tc, sendfile_through_small_socket_buffers, 0, 2);
    return tls_suite_run(s);
}
