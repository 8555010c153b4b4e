/* spindle-https-client-bench CERT KEY N: what keep-alive saves the HTTP
 * client over TLS. An HTTPS server (one worker) and a plain HTTP one in
 * this process answer a 13-byte GET; the client, on the main thread, makes
 * N sequential requests each way and prints the wall-clock microseconds
 * per request and the connections the server accepted:
 *   https-pooled   one pooled TLS connection for all N (one handshake)
 *   https-fresh    a new connection and full handshake per request
 *                  (max_idle_per_host < 0: nothing pooled)
 *   http-pooled    plain HTTP on one pooled connection, for reference
 * CERT and KEY: PEM files of a certificate naming IP 127.0.0.1; the client
 * trusts CERT itself (verification on, as by default). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/timer.h>

static int hello(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    (void)arg;
    return sp_http_response_set_body(res, "Hello, World!", 13);
}

static sp_http_server_t *serve(sp_iomanager_t *io, sp_tls_config_t *tls, int *port)
{
    sp_http_server_opts_t so = {.tls = tls};
    sp_http_server_t *s = sp_http_server_create(io, hello, NULL, &so);
    sp_addr_t a;
    if (!s || sp_addr_parse("127.0.0.1:0", &a) || sp_http_server_listen(s, &a) ||
        sp_http_server_start(s) || sp_http_server_addr(s, 0, &a)) {
        fprintf(stderr, "server failed\n");
        exit(1);
    }
    *port = sp_addr_port(&a);
    return s;
}

static uint64_t accepted(sp_http_server_t *s)
{
    sp_http_server_stats_t st;
    sp_http_server_stats(s, &st);
    return st.connections;
}

/* N GETs of url with a client of these options; prints the figures. */
static void run(const char *name, const char *url, sp_http_client_opts_t o, int n,
                sp_http_server_t *srv)
{
    sp_http_client_t *cl = sp_http_client_create(&o);
    uint64_t conns = accepted(srv), t0 = sp_now_ns();
    for (int i = 0; i < n; i++) {
        sp_http_client_response_t *r;
        int rc = sp_http_get(cl, url, &r);
        if (rc < 0) {
            fprintf(stderr, "%s: %s (%s)\n", name, strerror(-rc), sp_tls_error_reason());
            exit(1);
        }
        sp_http_client_response_free(r);
    }
    double us = (double)(sp_now_ns() - t0) / 1000.0 / n;
    printf("%-13s requests=%d us_per_request=%.1f connections=%llu\n", name, n, us,
           (unsigned long long)(accepted(srv) - conns));
    sp_http_client_destroy(cl);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s CERT KEY N\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[3]);
    sp_tls_cert_t cert = {argv[1], argv[2]};
    sp_tls_server_opts_t so = {.certs = &cert, .ncerts = 1};
    sp_tls_client_opts_t co = {.ca_file = argv[1]};
    sp_tls_config_t *scfg = sp_tls_server_config(&so), *ccfg = sp_tls_client_config(&co);
    sp_iomanager_t *io = sp_iomanager_create("bench", 1, false);
    if (n < 1 || !scfg || !ccfg || !io || sp_iomanager_start(io)) {
        fprintf(stderr, "setup failed: %s\n", sp_tls_error_reason());
        return 1;
    }
    int tls_port, plain_port;
    sp_http_server_t *tls = serve(io, scfg, &tls_port), *plain = serve(io, NULL, &plain_port);
    char https[64], http[64];
    snprintf(https, sizeof https, "https://127.0.0.1:%d/", tls_port);
    snprintf(http, sizeof http, "http://127.0.0.1:%d/", plain_port);
    run("https-pooled", https, (sp_http_client_opts_t){.tls = ccfg}, n, tls);
    run("https-fresh", https, (sp_http_client_opts_t){.tls = ccfg, .max_idle_per_host = -1}, n,
        tls);
    run("http-pooled", http, (sp_http_client_opts_t){0}, n, plain);
    sp_http_server_stop(tls, 1000000);
    sp_http_server_stop(plain, 1000000);
    sp_iomanager_stop(io);
    sp_http_server_destroy(tls);
    sp_http_server_destroy(plain);
    sp_iomanager_destroy(io);
    sp_tls_config_free(scfg);
    sp_tls_config_free(ccfg);
    return 0;
}
