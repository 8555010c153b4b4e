/* The TLS client side (sp_tls_connect) against the in-process echo
 * server and `openssl s_server`: verification with a CA file, untrusted
 * certificates and wrong names refused, insecure mode; timeouts, a client
 * in a fiber; config errors; reload under a live connection. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/scheduler.h>
#include <spindle/tls.h>

#include "real_server.h"
#include "testutil.h"
#include "tls_fixture.h"

static tls_server_t S;

static void start_with(const char *name)
{
    const char *const names[] = {name};
    sp_tls_cert_t certs[1];
    sp_tls_server_opts_t o;
    tls_server_opts(&o, certs, names, 1);
    static const char *const alpn[] = {"http/1.1"};
    o.alpn = alpn;
    o.nalpn = 1;
    tls_server_start(&S, &o, 2);
}

static void start_a(void)
{
    start_with("a");
}

static void start_a_ca2(void)
{
    start_with("a.ca2");
}

static void stop(void)
{
    tls_server_stop(&S);
}

static sp_tls_config_t *client_with(const char *ca, bool insecure)
{
    sp_tls_client_opts_t o = {.ca_file = ca ? tls_file(ca) : NULL, .insecure = insecure};
    sp_tls_config_t *cfg = sp_tls_client_config(&o);
    ck_assert_msg(cfg, "%s (%s)", strerror(errno), sp_tls_error_reason());
    return cfg;
}

/* Connect to S as `host`: sp_tls_connect's result; *fd stays open. */
static int dial(sp_tls_config_t *cfg, const char *host, int *fd, sp_tls_conn_t **c)
{
    *fd = tls_tcp_client(&S);
    return sp_tls_connect(cfg, *fd, host, 0, c);
}

static void echo(sp_tls_conn_t *c, const char *msg)
{
    size_t n = strlen(msg);
    char back[256] = "";
    ck_assert_int_eq(sp_tls_write(c, msg, n, 10000000), (ssize_t)n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = sp_tls_read(c, back + got, sizeof back - got, 10000000);
        ck_assert_int_gt(r, 0);
        got += (size_t)r;
    }
    ck_assert_int_eq(got, n);
    ck_assert_int_eq(memcmp(back, msg, n), 0);
}

static void hang_up(sp_tls_conn_t *c, int fd)
{
    sp_tls_free(c);
    close(fd);
}

START_TEST(connect_verifies_with_the_ca_file)
{
    static const char *const alpn[] = {"h2", "http/1.1"};
    sp_tls_client_opts_t o = {.ca_file = tls_file("ca1.pem"), .alpn = alpn, .nalpn = 2};
    sp_tls_config_t *cfg = sp_tls_client_config(&o);
    ck_assert_ptr_nonnull(cfg);
    int fd;
    sp_tls_conn_t *c;
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), 0);
    ck_assert_str_eq(sp_tls_version(c), "TLSv1.3");
    ck_assert_str_eq(sp_tls_alpn(c), "http/1.1");
    ck_assert_str_eq(sp_tls_server_name(c), "a.test");
    echo(c, "hello over TLS");
    /* The server answers ?info and closes: the read after it sees 0. */
    ck_assert_int_eq(sp_tls_write(c, "?info", 5, 10000000), 5);
    char line[256];
    ssize_t n = sp_tls_read(c, line, sizeof line - 1, 10000000);
    ck_assert_int_gt(n, 0);
    line[n] = '\0';
    ck_assert_str_eq(line, "version=TLSv1.3 alpn=http/1.1 sni=a.test reused=0\n");
    ck_assert_int_eq(sp_tls_read(c, line, sizeof line, 10000000), 0);
    hang_up(c, fd);
    /* An IP address is checked against the certificate's IP entries. */
    ck_assert_int_eq(dial(cfg, "127.0.0.1", &fd, &c), 0);
    ck_assert_ptr_null(sp_tls_server_name(c));
    echo(c, "by address");
    ck_assert_int_eq(sp_tls_shutdown(c, 1000000), 0);
    hang_up(c, fd);
    sp_tls_config_free(cfg);
}
END_TEST

START_TEST(an_untrusted_certificate_is_refused_unless_insecure)
{
    sp_tls_config_t *cfg = client_with("ca1.pem", false);
    int fd;
    sp_tls_conn_t *c = NULL;
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), SP_TLS_EVERIFY);
    ck_assert_str_eq(sp_tls_error_reason(), "unable to get local issuer certificate");
    ck_assert_ptr_null(c);
    close(fd);
    sp_tls_config_free(cfg);
    /* The system store (the default) does not know the test CAs either. */
    cfg = sp_tls_client_config(NULL);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), SP_TLS_EVERIFY);
    close(fd);
    sp_tls_config_free(cfg);
    cfg = client_with(NULL, true);
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), 0);
    echo(c, "insecure but encrypted");
    hang_up(c, fd);
    ck_assert_int_eq(dial(cfg, NULL, &fd, &c), 0);
    hang_up(c, fd);
    sp_tls_config_free(cfg);
}
END_TEST

START_TEST(a_wrong_host_name_is_refused)
{
    sp_tls_config_t *cfg = client_with("ca1.pem", false);
    int fd;
    sp_tls_conn_t *c;
    ck_assert_int_eq(dial(cfg, "b.test", &fd, &c), SP_TLS_EVERIFY);
    ck_assert_str_eq(sp_tls_error_reason(), "hostname mismatch");
    close(fd);
    ck_assert_int_eq(dial(cfg, "127.0.0.2", &fd, &c), SP_TLS_EVERIFY);
    close(fd);
    /* Without a host name nothing could be checked. */
    fd = tls_tcp_client(&S);
    ck_assert_int_eq(sp_tls_connect(cfg, fd, NULL, 0, &c), -EINVAL);
    close(fd);
    sp_tls_config_free(cfg);
}
END_TEST

START_TEST(a_read_times_out)
{
    sp_tls_config_t *cfg = client_with("ca1.pem", false);
    int fd;
    sp_tls_conn_t *c;
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), 0);
    char buf[16];
    ck_assert_int_eq(sp_tls_read(c, buf, sizeof buf, 50000), -ETIMEDOUT);
    ck_assert_str_eq(sp_tls_error_reason(), "timed out");
    echo(c, "still fine"); /* a timeout leaves the connection usable */
    hang_up(c, fd);
    sp_tls_config_free(cfg);
}
END_TEST

typedef struct fiber_job {
    sp_tls_config_t *cfg;
    int rounds;        /* connections each fiber makes */
    atomic_int failed;
    tls_server_t done; /* only its lock, cond and finished */
} fiber_job_t;

/* Connect, handshake, one echo, close: `rounds` times. */
static void fiber_client(void *arg)
{
    fiber_job_t *j = arg;
    for (int i = 0; i < j->rounds; i++) {
        int fd = sp_connect(&S.addr, 10000000);
        sp_tls_conn_t *c;
        int rc = fd < 0 ? fd : sp_tls_connect(j->cfg, fd, "a.test", 0, &c);
        if (rc == 0) {
            char got[16];
            ssize_t n = sp_tls_write(c, "from a fiber", 12, 10000000);
            n = n == 12 ? sp_tls_read(c, got, sizeof got, 10000000) : n;
            rc = n == 12 && memcmp(got, "from a fiber", 12) == 0 ? 0 : -EIO;
            sp_tls_free(c);
        }
        if (fd >= 0)
            sp_io_close(fd);
        if (rc)
            atomic_fetch_add(&j->failed, 1);
    }
    pthread_mutex_lock(&j->done.lock);
    j->done.finished++;
    pthread_cond_broadcast(&j->done.cond);
    pthread_mutex_unlock(&j->done.lock);
}

static void fibers_start(fiber_job_t *j, int fibers, int rounds)
{
    *j = (fiber_job_t){.cfg = client_with("ca1.pem", false), .rounds = rounds};
    pthread_mutex_init(&j->done.lock, NULL);
    pthread_cond_init(&j->done.cond, NULL);
    for (int i = 0; i < fibers; i++)
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(S.io), fiber_client, j, i % 2), 0);
}

START_TEST(a_fiber_connects_to_the_server_on_its_own_workers)
{
    fiber_job_t j;
    fibers_start(&j, 1, 1);
    ck_assert(tls_server_wait(&j.done, 1, 30000));
    ck_assert_int_eq(atomic_load(&j.failed), 0);
    sp_tls_config_free(j.cfg);
}
END_TEST

enum { RELOAD_FIBERS = 8, RELOAD_ROUNDS = 20 };

START_TEST(reloads_while_fibers_handshake)
{
    fiber_job_t j;
    fibers_start(&j, RELOAD_FIBERS, RELOAD_ROUNDS);
    int reloads = 0;
    while (!tls_server_wait(&j.done, RELOAD_FIBERS, 0)) {
        ck_assert_int_eq(sp_tls_config_reload(S.cfg), 0);
        reloads++;
    }
    ck_assert_int_gt(reloads, 0);
    ck_assert_int_eq(atomic_load(&j.failed), 0);
    sp_tls_config_free(j.cfg);
}
END_TEST

START_TEST(a_connection_outlives_its_config)
{
    sp_tls_config_t *cfg = client_with("ca1.pem", false);
    int fd;
    sp_tls_conn_t *c;
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), 0);
    sp_tls_config_free(cfg);
    echo(c, "config gone, connection fine");
    hang_up(c, fd);
}
END_TEST

START_TEST(config_errors_are_reported)
{
    sp_tls_cert_t cert = {tls_file("a.pem"), tls_file("nothing.key")};
    sp_tls_server_opts_t o = {.certs = &cert, .ncerts = 1};
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, ENOENT);
    cert.key_file = tls_file("b.key"); /* not a.pem's key */
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_str_eq(sp_tls_error_reason(), "key values mismatch");
    /* OpenSSL's first reason, not where it surfaced ("PEM lib"). */
    cert = (sp_tls_cert_t){tls_file("a.key"), tls_file("a.key")};
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_str_eq(sp_tls_error_reason(), "no start line");
    cert = (sp_tls_cert_t){tls_file("a.pem"), tls_file("a.key")};
    o.ciphers = "NO-SUCH-CIPHER";
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, EINVAL);
    o.ciphers = NULL;
    static const char *const bad_alpn[] = {""};
    o.alpn = bad_alpn;
    o.nalpn = 1;
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, EINVAL);
    o.nalpn = 0;
    o.ncerts = 0;
    ck_assert_ptr_null(sp_tls_server_config(&o));
    ck_assert_int_eq(errno, EINVAL);
    sp_tls_client_opts_t co = {.ca_file = tls_file("none.pem")};
    ck_assert_ptr_null(sp_tls_client_config(&co));
    ck_assert_int_eq(errno, ENOENT);
}
END_TEST

static void copy_cert(const char *from, const char *to)
{
    char cmd[1200], out[512];
    int n = snprintf(cmd, sizeof cmd, "cp %s.pem %s.pem && cp %s.key %s.key", from, to, from, to);
    ck_assert(n > 0 && (size_t)n < sizeof cmd);
    ck_assert_int_eq(tls_run(cmd, out, sizeof out), 0);
}

START_TEST(reload_under_a_live_connection)
{
    char live[320], from[320];
    snprintf(live, sizeof live, "%s", tls_file("live"));
    snprintf(from, sizeof from, "%s", tls_file("a"));
    copy_cert(from, live);
    start_with("live");
    sp_tls_config_t *ca1 = client_with("ca1.pem", false), *ca2 = client_with("ca2.pem", false);
    int old_fd, fd;
    sp_tls_conn_t *old, *c;
    ck_assert_int_eq(dial(ca1, "a.test", &old_fd, &old), 0);
    echo(old, "before");

    snprintf(from, sizeof from, "%s", tls_file("a.ca2"));
    copy_cert(from, live);
    ck_assert_int_eq(sp_tls_config_reload(S.cfg), 0);
    echo(old, "after the reload");
    ck_assert_int_eq(dial(ca1, "a.test", &fd, &c), SP_TLS_EVERIFY);
    close(fd);
    ck_assert_int_eq(dial(ca2, "a.test", &fd, &c), 0);
    echo(c, "new certificate");
    hang_up(c, fd);

    /* A broken file: the reload fails and the config stays. */
    char cmd[400], out[512];
    snprintf(cmd, sizeof cmd, "echo garbage > %s.pem", live);
    ck_assert_int_eq(tls_run(cmd, out, sizeof out), 0);
    ck_assert_int_eq(sp_tls_config_reload(S.cfg), -EINVAL);
    ck_assert_int_eq(dial(ca2, "a.test", &fd, &c), 0);
    hang_up(c, fd);
    echo(old, "still the old one");
    hang_up(old, old_fd);
    sp_tls_config_free(ca1);
    sp_tls_config_free(ca2);
    tls_server_stop(&S);
}
END_TEST

/* ---- against openssl s_server ------------------------------------------- */

static rs_server_t ossl = {.pid = -1};
static int ossl_port;

static bool s_server_spawn(int port)
{
    char accept[32];
    snprintf(accept, sizeof accept, "127.0.0.1:%d", port);
    char cert[320], key[320];
    snprintf(cert, sizeof cert, "%s", tls_file("a.pem"));
    snprintf(key, sizeof key, "%s", tls_file("a.key"));
    char *argv[] = {SP_OPENSSL, "s_server", "-accept", accept, "-cert", cert, "-key", key,
                    "-www", NULL};
    return rs_start(&ossl, argv, "ACCEPT", 10000);
}

START_TEST(connect_to_openssl_s_server)
{
    ck_assert_msg(ossl.pid > 0, "%s", ossl.error);
    sp_tls_config_t *cfg = client_with("ca1.pem", false);
    sp_addr_t a;
    char text[64];
    snprintf(text, sizeof text, "127.0.0.1:%d", ossl_port);
    ck_assert_int_eq(sp_addr_parse(text, &a), 0);
    S.addr = a;
    int fd;
    sp_tls_conn_t *c;
    ck_assert_int_eq(dial(cfg, "a.test", &fd, &c), 0);
    const char req[] = "GET / HTTP/1.0\r\n\r\n";
    ck_assert_int_eq(sp_tls_write(c, req, sizeof req - 1, 10000000), (ssize_t)sizeof req - 1);
    char buf[64] = "";
    ck_assert_int_gt(sp_tls_read(c, buf, sizeof buf - 1, 10000000), 8);
    ck_assert_msg(strncmp(buf, "HTTP/1.0 200", 12) == 0, "%s", buf);
    hang_up(c, fd);
    ck_assert_int_eq(dial(cfg, "b.test", &fd, &c), SP_TLS_EVERIFY);
    close(fd);
    sp_tls_config_free(cfg);
}
END_TEST

static void s_server_start(void)
{
    ossl_port = rs_start_on_free_port(&ossl, s_server_spawn);
}

int main(void)
{
    tls_certs_make();
    Suite *s = suite_create("tls_client");
    SP_TEST_CASE(s, "verify", 60, start_a, stop, connect_verifies_with_the_ca_file,
                 a_wrong_host_name_is_refused, a_read_times_out,
                 a_fiber_connects_to_the_server_on_its_own_workers,
                 reloads_while_fibers_handshake, a_connection_outlives_its_config);
    SP_TEST_CASE(s, "untrusted", 60, start_a_ca2, stop,
                 an_untrusted_certificate_is_refused_unless_insecure);
    SP_TEST_CASE(s, "config", 60, NULL, NULL, config_errors_are_reported,
                 reload_under_a_live_connection);
    TCase *tc = SP_TEST_CASE(s, "s_server", 60, NULL, NULL, connect_to_openssl_s_server);
    tcase_add_unchecked_fixture(tc, s_server_start, NULL);
    int rc = tls_suite_run(s);
    rs_stop(&ossl);
    return rc;
}
