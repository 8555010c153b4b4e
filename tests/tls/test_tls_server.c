/* The TLS server side against real clients: Python's ssl module
 * (tls_client.py) and `openssl s_client`, on an in-process echo server
 * (tls_fixture.c); stalled, garbage and vanishing clients. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <spindle/tls.h>

#include "testutil.h"
#include "tls_fixture.h"

static tls_server_t S;

/* a.test (the default) and b.test, both from ca1, ALPN http/1.1. */
static void start_ab(void)
{
    static const char *const names[] = {"a", "b"};
    static const char *const alpn[] = {"http/1.1"};
    sp_tls_cert_t certs[2];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, names, 2);
    o.alpn = alpn;
    o.nalpn = 1;
    tls_server_start(&S, &o, 2);
}

static void stop(void)
{
    tls_server_stop(&S);
}

static void python(const char *args, char *out, size_t size)
{
    tls_python(&S, args, out, size);
}

START_TEST(python_handshake_and_echo)
{
    char out[4096];
    python("", out, sizeof out);
    tls_has(out, "version=TLSv1.3\n");
    tls_has(out, "cn=a.test\n");
    tls_has(out, "echo=ok\n");
    tls_has(out, "info=version=TLSv1.3 alpn=- sni=a.test reused=0\n");
}
END_TEST

START_TEST(python_alpn_picks_http11)
{
    char out[4096];
    python("--alpn h2,http/1.1", out, sizeof out);
    tls_has(out, "alpn=http/1.1\n");
    tls_has(out, "info=version=TLSv1.3 alpn=http/1.1 ");
    /* No protocol in common: the handshake goes on without ALPN. */
    python("--alpn h2", out, sizeof out);
    tls_has(out, "alpn=None\n");
}
END_TEST

START_TEST(python_sni_picks_the_certificate)
{
    char out[4096];
    python("--sni b.test", out, sizeof out);
    tls_has(out, "cn=b.test\n");
    tls_has(out, "sni=b.test ");
    python("--sni a.test", out, sizeof out);
    tls_has(out, "cn=a.test\n");
}
END_TEST

START_TEST(python_forced_versions_and_resumption)
{
    char out[4096];
    python("--tls 1.2 --resume", out, sizeof out);
    tls_has(out, "version=TLSv1.2\n");
    tls_has(out, "reused=1\n");
    tls_has(out, "info2=version=TLSv1.2 alpn=- sni=a.test reused=1\n");
    python("--tls 1.3 --resume --sni b.test", out, sizeof out);
    tls_has(out, "version=TLSv1.3\n");
    tls_has(out, "cn=b.test\n");
    tls_has(out, "reused=1\n");
    tls_has(out, "info2=version=TLSv1.3 alpn=- sni=b.test reused=1\n");
}
END_TEST

static void s_client(const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "sh -c 'echo ?info | %s s_client -connect 127.0.0.1:%d -CAfile %s -brief "
             "-verify_return_error -ign_eof %s'",
             SP_OPENSSL, S.port, tls_file("ca1.pem"), args);
    int rc = tls_run(cmd, out, size);
    ck_assert_msg(rc == 0, "%s: exit %d:\n%s", cmd, rc, out);
}

START_TEST(openssl_s_client_versions_alpn_servername)
{
    char out[8192];
    s_client("-tls1_2 -servername a.test", out, sizeof out);
    tls_has(out, "Protocol version: TLSv1.2");
    tls_has(out, "version=TLSv1.2 alpn=- sni=a.test reused=0");
    s_client("-tls1_3 -servername b.test -alpn http/1.1", out, sizeof out);
    tls_has(out, "Protocol version: TLSv1.3");
    tls_has(out, "CN = b.test");
    tls_has(out, "version=TLSv1.3 alpn=http/1.1 sni=b.test reused=0");
    /* No SNI: the first certificate. */
    s_client("-noservername", out, sizeof out);
    tls_has(out, "CN = a.test");
}
END_TEST

START_TEST(a_client_with_only_old_ciphers_fails_the_handshake)
{
    char cmd[512], out[8192];
    snprintf(cmd, sizeof cmd,
             "%s s_client -connect 127.0.0.1:%d -tls1_2 -cipher AES128-SHA </dev/null",
             SP_OPENSSL, S.port);
    ck_assert_int_ne(tls_run(cmd, out, sizeof out), 0);
    ck_assert(tls_server_wait(&S, 1, 30000));
    ck_assert_int_eq(tls_server_count(&S, TLS_HANDSHAKE), 1);
}
END_TEST

/* Wait (bounded) for the server to end a raw connection: 0 (EOF) or
 * -errno (a reset). */
static int until_closed(int fd)
{
    char buf[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        ck_assert_int_eq(poll(&p, 1, 30000), 1);
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return n == 0 ? 0 : -errno;
    }
}

/* The first bytes of a ClientHello (a handshake record of 512 bytes, of
 * which these are all the server gets). */
static const unsigned char hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00,
                                            0x01, 0xfc, 0x03, 0x03, 0x5a, 0x5a, 0x5a};

/* With ktls (_i 1) too: OpenSSL's socket BIO then reads the socket, and
 * a read the hooks parked by themselves would outlast the timeout. */
START_TEST(a_stalled_handshake_is_dropped_while_others_are_served)
{
    static const char *const names[] = {"a"};
    sp_tls_cert_t certs[1];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, names, 1);
    o.handshake_timeout_us = 1000000;
    o.ktls = _i;
    tls_server_start(&S, &o, 1); /* one worker: a blocked one would serve nobody */
    /* One sends nothing, one stops inside its ClientHello. */
    int silent = tls_tcp_client(&S), halfway = tls_tcp_client(&S);
    ck_assert_int_eq(send(halfway, hello_start, sizeof hello_start, 0),
                     (ssize_t)sizeof hello_start);
    char out[4096];
    python("", out, sizeof out);
    tls_has(out, "echo=ok\n");
    ck_assert_int_eq(until_closed(silent), 0);
    int rc = until_closed(halfway);
    ck_assert_msg(rc == 0 || rc == -ECONNRESET, "%d", rc);
    close(silent);
    close(halfway);
    ck_assert(tls_server_wait(&S, 3, 30000));
    ck_assert_int_eq(tls_server_count(&S, TLS_TIMEDOUT), 2);
    ck_assert_int_eq(tls_server_count(&S, TLS_OK), 1);
    tls_server_stop(&S);
}
END_TEST

START_TEST(garbage_instead_of_a_client_hello_is_closed)
{
    int fd = tls_tcp_client(&S);
    const char req[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    ck_assert_int_eq(send(fd, req, sizeof req - 1, 0), (ssize_t)sizeof req - 1);
    int rc = until_closed(fd);
    ck_assert_msg(rc == 0 || rc == -ECONNRESET, "%d", rc);
    close(fd);
    ck_assert(tls_server_wait(&S, 1, 30000));
    ck_assert_int_eq(tls_server_count(&S, TLS_HANDSHAKE), 1);
    char out[4096];
    python("", out, sizeof out);
    tls_has(out, "echo=ok\n");
}
END_TEST

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

enum { VANISHING = 1000, BATCH = 100 };

/* Wait (bounded) until n handlers have finished and the server has
 * closed their sockets (it does so after each handler returns). */
static void settle(int n)
{
    ck_assert(tls_server_wait(&S, n, 60000));
    sp_tcp_server_stats_t st;
    for (int i = 0; i < 3000; i++) {
        ck_assert_int_eq(sp_tcp_server_stats(S.srv, &st), 0);
        if (st.active == 0)
            break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    ck_assert_int_eq(st.active, 0);
}

START_TEST(a_thousand_clients_leaving_mid_handshake_leak_nothing)
{
    /* One connection first: the count starts with the server settled
     * (its acceptors running, whatever they open at start-up done). */
    close(tls_tcp_client(&S));
    settle(1);
    int before = fd_count();
    for (int done = 0; done < VANISHING; done += BATCH) {
        int fds[BATCH];
        for (int i = 0; i < BATCH; i++) {
            fds[i] = tls_tcp_client(&S);
            if (i % 2) /* half send a partial hello, half nothing */
                ck_assert_int_eq(send(fds[i], hello_start, sizeof hello_start, 0),
                                 (ssize_t)sizeof hello_start);
            else /* and those leave with a reset */
                setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &(struct linger){1, 0},
                           sizeof(struct linger));
        }
        for (int i = 0; i < BATCH; i++)
            close(fds[i]);
    }
    settle(1 + VANISHING);
    ck_assert_int_eq(tls_server_count(&S, TLS_GONE), 1 + VANISHING);
    ck_assert_int_eq(fd_count(), before);
    char out[4096];
    python("", out, sizeof out);
    tls_has(out, "echo=ok\n");
}
END_TEST

/* min_version "TLSv1.3": a TLS 1.2 client fails the handshake, a 1.3 one
 * is served; a version other than the two is refused. */
START_TEST(min_version_tls13_refuses_tls12)
{
    static const char *const names[] = {"a"};
    sp_tls_cert_t certs[1];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, names, 1);
    o.min_version = "TLSv1.1";
    errno = 0;
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_str_eq(sp_tls_error_reason(), "bad min_version (TLSv1.2 or TLSv1.3)");
    tls_server_opts(&o, certs, names, 1);
    o.min_version = "TLSv1.3";
    tls_server_start(&S, &o, 1);
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd, "python3 %s --port %d --ca %s --tls 1.2", SP_TLS_CLIENT_PY,
             S.port, tls_file("ca1.pem"));
    ck_assert_int_ne(tls_run(cmd, out, sizeof out), 0);
    ck_assert(tls_server_wait(&S, 1, 30000));
    ck_assert_int_eq(tls_server_count(&S, TLS_HANDSHAKE), 1);
    python("--tls 1.3", out, sizeof out);
    tls_has(out, "version=TLSv1.3\n");
    tls_server_stop(&S);
}
END_TEST

int main(void)
{
    tls_certs_make();
    Suite *s = suite_create("tls_server");
    SP_TEST_CASE(s, "python", 120, start_ab, stop, python_handshake_and_echo,
                 python_alpn_picks_http11, python_sni_picks_the_certificate,
                 python_forced_versions_and_resumption);
    SP_TEST_CASE(s, "s_client", 120, start_ab, stop, openssl_s_client_versions_alpn_servername,
                 a_client_with_only_old_ciphers_fails_the_handshake);
    TCase *stall = tcase_create("stall");
    tcase_set_timeout(stall, 120);
    tcase_add_loop_test(stall, a_stalled_handshake_is_dropped_while_others_are_served, 0, 2);
    suite_add_tcase(s, stall);
    SP_TEST_CASE(s, "min_version", 120, NULL, NULL, min_version_tls13_refuses_tls12);
    SP_TEST_CASE(s, "hostile", 180, start_ab, stop, garbage_instead_of_a_client_hello_is_closed,
                 a_thousand_clients_leaving_mid_handshake_leak_nothing);
    return tls_suite_run(s);
}
