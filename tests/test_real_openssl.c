/* OpenSSL's blocking API in fibers: 200 fibers on ONE IOManager worker each
 * open a TLS connection with SSL_connect (verifying the server's
 * certificate), write a request with SSL_write and read the answer with
 * SSL_read, against an `openssl s_server -www` this test starts with a
 * certificate it makes.
 *
 * The overlap is shown without timing, as for memcached: the server is
 * stopped (SIGSTOP) before the fibers start; every one of them connects and
 * sends its ClientHello, then parks waiting for the ServerHello, while one
 * more fiber on the same worker still runs and sees all 200 parked. It
 * then resumes the server (SIGCONT), and every handshake and request must
 * succeed. Built twice, like test_hooks. */
#include <check.h>
#include <stdio.h>

#include "clients.h"
#include "real_check.h"
#include "real_server.h"

#include "testutil.h"

#ifndef SP_OPENSSL
#define SP_OPENSSL "/usr/bin/openssl"
#endif

enum { FIBERS = 200 };

static rs_server_t tls;
static int tls_port;
static char dir[256], cert[300], key[300];

static bool s_server_spawn(int port)
{
    char accept[32];
    snprintf(accept, sizeof accept, "127.0.0.1:%d", port);
    char *argv[] = {SP_OPENSSL, "s_server", "-accept", accept, "-cert", cert, "-key", key,
                    "-www", NULL};
    return rs_start(&tls, argv, "ACCEPT", 10000);
}

/* Unchecked fixture: once, in Check's parent process: a key and a
 * self-signed certificate for "localhost", then the server. A test fails
 * with tls.error if this did not work. */
static void s_server_start(void)
{
    tls.pid = -1;
    if (!rs_make_dir(dir, sizeof dir, "sp-openssl")) {
        snprintf(tls.error, sizeof tls.error, "no temporary directory");
        return;
    }
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    char *argv[] = {SP_OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", cert,
                    NULL};
    if (!rs_run(&tls, argv, 30000))
        return; /* tls.error says why */
    tls_port = rs_start_on_free_port(&tls, s_server_spawn);
}

static void s_server_stop(void)
{
    rs_stop(&tls);
    rs_remove_dir(dir);
}

START_TEST(openssl_200_fibers_park_on_a_stopped_server)
{
    ck_assert_msg(tls.pid > 0, "%s", tls.error);
    hc_result_t one, many;
    ck_assert_int_eq(hc_openssl_run("127.0.0.1", tls_port, cert, 1, NULL, &one), 0);
    hc_stall_t stall = {rc_resume_server, &tls.pid};
    rc_stop_server(tls.pid, &one);
    ck_assert_int_eq(hc_openssl_run("127.0.0.1", tls_port, cert, FIBERS, &stall, &many), 0);
    rc_check_stalled("OpenSSL", FIBERS, &many);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("real_openssl");
    TCase *tc = tcase_create("openssl");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, s_server_start, s_server_stop);
    tcase_add_test(tc, openssl_200_fibers_park_on_a_stopped_server);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
