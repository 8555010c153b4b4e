/* spindled's HTTPS server (https.*) against real clients: curl --cacert,
 * Python's ssl, http.client and websockets (https_peer.py), openssl
 * s_client and the library's own TLS client; http.redirect_https; what is
 * refused at start; the certificate read again on SIGHUP while a
 * kept-alive TLS connection goes on; https.ktls reported at start.
 *
 * The certificates come from tests/tls/make_certs.sh: a.pem (CN a.test)
 * and b.pem (CN b.test), both from ca1, both for IP 127.0.0.1. Each test's
 * daemon starts in its directory and takes tls/cert.pem and tls/key.pem
 * from there (relative paths). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/tls.h>

#include "daemon_fixture.h"

static char certs[96]; /* made once by the runner, in base */

static void make_all(void)
{
    make_base();
    snprintf(certs, sizeof certs, "%s/certs", base);
    ck_assert_int_eq(mkdir(certs, 0700), 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sh %s %s %s", SP_TLS_CERTS_SH, SP_OPENSSL, certs);
    ck_assert_int_eq(system(cmd), 0);
}

/* A shell command (bounded by `timeout 60`), its stdout and stderr into
 * out; its exit status. */
static int run(const char *cmd, char *out, size_t size)
{
    char full[1400];
    snprintf(full, sizeof full, "timeout 60 %s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t len = fread(out, 1, size - 1, p);
    out[len] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void has(const char *out, const char *what)
{
    ck_assert_msg(strstr(out, what), "no \"%s\" in:\n%s", what, out);
}

/* https_peer.py MODE PORT ARGS; its output. */
static void peer(const char *mode, int port, const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %d %s", HTTPS_PEER_PY, mode, port, args);
    int rc = run(cmd, out, size);
    ck_assert_msg(rc == 0, "%s: exit %d:\n%s", cmd, rc, out);
}

/* The CN of the certificate a new handshake gets. */
static void peer_cn_is(int port, const char *want)
{
    char args[160], out[4096];
    snprintf(args, sizeof args, "%s/ca1.pem", certs);
    peer("cn", port, args, out, sizeof out);
    has(out, want);
}

/* The daemon's tls/cert.pem from the test certificate `cert` and
 * tls/key.pem from `key` ("a", "b"), each replaced at once (a rename). */
static void install(const char *cert, const char *key)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/tls && cp %s/%s.pem %s/tls/c.tmp && cp %s/%s.key %s/tls/k.tmp && "
             "mv %s/tls/c.tmp %s/tls/cert.pem && mv %s/tls/k.tmp %s/tls/key.pem",
             dir, certs, cert, dir, certs, key, dir, dir, dir, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* HTTPS on port 0 with tls/cert.pem and tls/key.pem, plus `extra`. */
static void https_config(const char *extra)
{
    char text[512];
    snprintf(text, sizeof text,
             "https:\n  enabled: true\n  listen: [127.0.0.1:0]\n"
             "  cert: tls/cert.pem\n  key: tls/key.pem\n%s",
             extra);
    write_config(text);
}

/* spindled -c conf_path started in this test's directory, serving. */
static void start_here(proc_t *p)
{
    const char *args[] = {"-c", conf_path, NULL};
    spawn_in(p, dir, args);
    ck_assert_msg(await_worker(p, now_ms() + 10000), "spindled did not start");
    ck_assert_int_gt(p->https_port, 0);
}

/* www/file.txt in this test's directory (http.root: www). */
static void make_www(void)
{
    char www[192];
    snprintf(www, sizeof www, "%s/www", dir);
    ck_assert_int_eq(mkdir(www, 0755), 0);
    snprintf(www, sizeof www, "%s/www/file.txt", dir);
    write_file(www, "a static file\n");
}

START_TEST(https_serves_the_http_routes_and_wss)
{
    install("a", "a");
    make_www();
    https_config("http.ws_echo_route: true\nhttp.ws_deflate: true\nhttp.root: www\n");
    proc_t p;
    start_here(&p);
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd,
             "curl -sS --cacert %s/ca1.pem https://127.0.0.1:%d/plaintext "
             "https://127.0.0.1:%d/file.txt",
             certs, p.https_port, p.https_port);
    ck_assert_int_eq(run(cmd, out, sizeof out), 0);
    ck_assert_str_eq(out, "Hello, World!a static file\n");
    snprintf(cmd, sizeof cmd, "%s/ca1.pem", certs);
    peer("get", p.https_port, cmd, out, sizeof out);
    has(out, "plaintext Hello, World!\n");
    has(out, "wss over tls\n");
    has(out, "extensions permessage-deflate"); /* http.ws_deflate */
    /* The plain server serves on beside it. */
    char buf[1024];
    ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    stop_daemon(&p);
}
END_TEST

START_TEST(protocols_tls13_refuses_a_tls12_client)
{
    install("a", "a");
    https_config("  protocols: TLSv1.3\n");
    proc_t p;
    start_here(&p);
    char cmd[512], out[8192];
    const char *s_client = "%s s_client -connect 127.0.0.1:%d -CAfile %s/ca1.pem -brief %s "
                           "</dev/null";
    snprintf(cmd, sizeof cmd, s_client, SP_OPENSSL, p.https_port, certs, "-tls1_2");
    ck_assert_int_ne(run(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, s_client, SP_OPENSSL, p.https_port, certs, "-tls1_3");
    ck_assert_msg(run(cmd, out, sizeof out) == 0, "%s", out);
    has(out, "Protocol version: TLSv1.3");
    stop_daemon(&p);
}
END_TEST

/* http.redirect_https: every plain request gets 308 to the HTTPS port,
 * with the Host's name and the target as sent. */
START_TEST(redirect_https_answers_308_with_the_https_url)
{
    install("a", "a");
    https_config("http.redirect_https: true\n");
    proc_t p;
    start_here(&p);
    char out[4096], want[256];
    peer("redirect", p.http_port, "example.test:8080 '/a/b%20c?x=1&y=2'", out, sizeof out);
    snprintf(want, sizeof want, "status=308 location=https://example.test:%d/a/b%%20c?x=1&y=2\n",
             p.https_port);
    has(out, want);
    peer("redirect", p.http_port, "'[::1]:8080' /plaintext", out, sizeof out);
    snprintf(want, sizeof want, "status=308 location=https://[::1]:%d/plaintext\n",
             p.https_port);
    has(out, want);
    /* curl follows it to the HTTPS server. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "curl -sSL --cacert %s/ca1.pem http://127.0.0.1:%d/plaintext",
             certs, p.http_port);
    ck_assert_int_eq(run(cmd, out, sizeof out), 0);
    ck_assert_str_eq(out, "Hello, World!");
    /* A Host that is no host name goes nowhere. */
    int fd = connect_port(p.http_port);
    const char bad[] = "GET / HTTP/1.1\r\nHost: evil.test/x@y\r\n\r\n";
    ck_assert_int_eq(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    ck_assert_int_eq(read_response(fd, out, sizeof out, now_ms() + 5000), 400);
    close(fd);
    stop_daemon(&p);
}
END_TEST

/* spindled started in the test's directory with `args` exits 2 having
 * said `want`. */
static void refused(const char *const *args, const char *want)
{
    char out[4096], err[4096];
    int status = run_in_to_end(dir, args, out, sizeof out, err, sizeof err);
    ck_assert_msg(status == 2 && strstr(err, want), "exit %d, no '%s' in:\n%s", status, want,
                  err);
}

START_TEST(bad_https_settings_are_refused_at_start)
{
    write_config("");
    const char *no_cert[] = {"-c", conf_path, "-s", "https.enabled=true", NULL};
    refused(no_cert, "spindled: cli: https.enabled: true needs https.cert and https.key");
    https_config("");
    const char *c[] = {"-c", conf_path, NULL};
    char want[512];
    snprintf(want, sizeof want,
             "spindled: https.cert '%s/tls/cert.pem', https.key '%s/tls/key.pem': "
             "No such file or directory (cannot read the certificate file)",
             dir, dir);
    refused(c, want);
    /* OpenSSL's reasons: a key of another certificate, a file of no PEM. */
    install("a", "b");
    refused(c, "Invalid argument (key values mismatch)");
    char path[192];
    snprintf(path, sizeof path, "%s/tls/cert.pem", dir);
    write_file(path, "not a certificate\n");
    refused(c, "Invalid argument (no start line)");
    install("a", "a");
    const char *bad_version[] = {"-c", conf_path, "-s", "https.protocols=TLSv1.1", NULL};
    refused(bad_version, "https.protocols: 'TLSv1.1' is not TLSv1.2 or TLSv1.3");
    const char *no_https[] = {"-c", conf_path, "-s", "https.enabled=false",
                              "-s", "http.redirect_https=true", NULL};
    refused(no_https, "http.redirect_https: true needs the HTTPS server");
}
END_TEST

START_TEST(https_sharing_a_port_is_refused)
{
    install("a", "a");
    https_config("");
    const char *with_http[] = {"-c", conf_path, "-s", "http.listen=[127.0.0.1:18443]",
                               "-s", "https.listen=[0.0.0.0:18443]", NULL};
    refused(with_http, "spindled: cli: https.listen: '0.0.0.0:18443' clashes with "
                       "'127.0.0.1:18443' of http.listen (cli)");
    const char *with_echo[] = {"-c", conf_path, "-s", "echo.listen=[127.0.0.1:18443]",
                               "-s", "https.listen=[127.0.0.1:18443]", NULL};
    refused(with_echo, "echo.listen: '127.0.0.1:18443' clashes with '127.0.0.1:18443' of "
                       "https.listen (cli)");
    const char *with_admin[] = {"-c", conf_path, "-s", "admin.listen=127.0.0.1:18443",
                                "-s", "https.listen=[127.0.0.1:18443]", NULL};
    refused(with_admin, "admin.listen: '127.0.0.1:18443' clashes with '127.0.0.1:18443' of "
                        "https.listen (cli)");
}
END_TEST

/* GET /plaintext on a kept-alive TLS connection; the status. */
static int tls_plaintext(sp_tls_conn_t *c)
{
    const char req[] = "GET /plaintext HTTP/1.1\r\nHost: t\r\n\r\n";
    ck_assert_int_eq(sp_tls_write(c, req, sizeof req - 1, 5000000), (ssize_t)sizeof req - 1);
    char buf[1024];
    size_t len = 0;
    buf[0] = '\0';
    while (!strstr(buf, "Hello, World!") && len < sizeof buf - 1) {
        ssize_t n = sp_tls_read(c, buf + len, sizeof buf - 1 - len, 5000000);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return atoi(buf + 9);
}

/* SIGHUP reads the files again: a bad pair is logged and the old
 * certificate stays; a good one is served to new handshakes, and a
 * connection made before goes on. */
START_TEST(sighup_serves_a_renewed_certificate)
{
    install("a", "a");
    https_config("");
    proc_t p;
    start_here(&p);
    char ca[160];
    snprintf(ca, sizeof ca, "%s/ca1.pem", certs);
    sp_tls_config_t *cfg = sp_tls_client_config(&(sp_tls_client_opts_t){.ca_file = ca});
    ck_assert_ptr_nonnull(cfg);
    int fd = connect_port(p.https_port);
    sp_tls_conn_t *old;
    ck_assert_int_eq(sp_tls_connect(cfg, fd, "127.0.0.1", 0, &old), 0);
    ck_assert_int_eq(tls_plaintext(old), 200);
    peer_cn_is(p.https_port, "cn=a.test\n");

    char err[8192];
    install("b", "a");
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    has(read_err_until(&p, "old one kept", err, sizeof err),
        "https certificate reload failed, old one kept");
    has(err, "key values mismatch");
    peer_cn_is(p.https_port, "cn=a.test\n");

    install("b", "b");
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    has(read_err_until(&p, "https certificate reloaded", err, sizeof err),
        "https certificate reloaded");
    peer_cn_is(p.https_port, "cn=b.test\n");
    ck_assert_int_eq(tls_plaintext(old), 200);
    sp_tls_free(old);
    close(fd);
    sp_tls_config_free(cfg);
    stop_daemon(&p);
}
END_TEST

/* https.ktls: the start says on "spindle.tls" whether the kernel has
 * TLS, and static files come through either way. */
START_TEST(https_ktls_reports_the_kernel_and_serves_files)
{
    install("a", "a");
    make_www();
    https_config("  ktls: true\nhttp.root: www\n");
    proc_t p;
    start_here(&p);
    char cmd[512], out[4096];
    snprintf(cmd, sizeof cmd, "curl -sS --cacert %s/ca1.pem https://127.0.0.1:%d/file.txt",
             certs, p.https_port);
    ck_assert_int_eq(run(cmd, out, sizeof out), 0);
    ck_assert_str_eq(out, "a static file\n");
    char err[8192];
    read_err_until(&p, "kTLS", err, sizeof err);
    has(err, "spindle.tls");
    has(err, "kTLS");
    stop_daemon(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spindled_https");
    TCase *tc = SP_TEST_CASE(s, "https", 120, setup, teardown,
                             https_serves_the_http_routes_and_wss,
                             protocols_tls13_refuses_a_tls12_client,
                             redirect_https_answers_308_with_the_https_url,
                             bad_https_settings_are_refused_at_start,
                             https_sharing_a_port_is_refused,
                             sighup_serves_a_renewed_certificate,
                             https_ktls_reports_the_kernel_and_serves_files);
    tcase_add_unchecked_fixture(tc, make_all, remove_base);
    return sp_test_run(s);
}
