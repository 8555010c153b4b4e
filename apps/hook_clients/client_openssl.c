/* The OpenSSL demo; see clients.h. Each fiber uses OpenSSL's blocking API
 * on a socket of its own (SSL_connect, SSL_write, SSL_read, as libpq,
 * libcurl and hiredis-ssl do): OpenSSL's socket BIO reads and writes the
 * fd with read and write, which the hooks turn into parks. Verification
 * is on: the server's certificate must chain to ca_file and name
 * "localhost". */
#include "clients.h"
#include "run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static void ssl_error(const char *what, char *err, size_t errlen)
{
    char reason[160];
    ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
    snprintf(err, errlen, "%s: %s", what, reason);
}

static int connect_to(const hc_run_t *r)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (inet_pton(AF_INET, r->host, &a.sin_addr) != 1 ||
                    connect(fd, (struct sockaddr *)&a, sizeof a) != 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A GET over the TLS session; true when the answer starts "HTTP/1.0 200". */
static bool get_over(SSL *ssl, char *err, size_t errlen)
{
    static const char req[] = "GET / HTTP/1.0\r\n\r\n";
    char buf[16];
    if (SSL_write(ssl, req, sizeof req - 1) != (int)sizeof req - 1) {
        ssl_error("SSL_write", err, errlen);
        return false;
    }
    size_t got = 0;
    for (int n; got < 12 && (n = SSL_read(ssl, buf + got, (int)(12 - got))) > 0;)
        got += (size_t)n;
    if (got == 12 && !memcmp(buf, "HTTP/1.0 200", 12))
        return true;
    snprintf(err, errlen, "SSL_read: %zu bytes of the answer, not HTTP/1.0 200", got);
    return false;
}

static bool openssl_request(const hc_run_t *r, int index, char *err, size_t errlen)
{
    (void)index;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || SSL_CTX_load_verify_locations(ctx, r->ca_file, NULL) != 1) {
        ssl_error("SSL_CTX with the test CA", err, errlen);
        SSL_CTX_free(ctx);
        return false;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int fd = connect_to(r);
    SSL *ssl = fd >= 0 ? SSL_new(ctx) : NULL;
    bool ok = false;
    if (fd < 0)
        snprintf(err, errlen, "connect to %s:%d failed", r->host, r->port);
    else if (!ssl || !SSL_set_fd(ssl, fd) || !SSL_set_tlsext_host_name(ssl, "localhost") ||
             !SSL_set1_host(ssl, "localhost"))
        ssl_error("SSL_new", err, errlen);
    else if (SSL_connect(ssl) != 1)
        ssl_error("SSL_connect", err, errlen);
    else
        ok = get_over(ssl, err, errlen);
    if (ok)
        SSL_shutdown(ssl);
    SSL_free(ssl);
    if (fd >= 0)
        close(fd);
    SSL_CTX_free(ctx);
    return ok;
}

int hc_openssl_run(const char *host, int port, const char *ca_file, int fibers,
                   const hc_stall_t *stall, hc_result_t *out)
{
    hc_run_t r = {.request = openssl_request, .host = host, .port = port,
                  .ca_file = ca_file, .stall = stall, .out = out};
    return hc_run_fibers(&r, fibers);
}
