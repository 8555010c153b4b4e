/* spindled's HTTPS: the TLS configuration of the https variables, its
 * reload on SIGHUP, and http.redirect_https, which sends plain HTTP
 * clients to the same URL on the HTTPS server. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <spindle/log.h>
#include <spindle/tls.h>

#include "spindled.h"

/* An optional string variable: NULL when empty (the TLS layer's default). */
static const char *or_null(const sp_cvar_t *v)
{
    const char *s = sp_cvar_string(v);
    return *s ? s : NULL;
}

sp_tls_config_t *spindled_tls_config(const spindled_t *d)
{
    const spindled_vars_t *v = &d->v;
    sp_tls_cert_t cert = {d->tls_cert, d->tls_key};
    const char *alpn[] = {"http/1.1"};
    sp_tls_server_opts_t o = {
        .certs = &cert,
        .ncerts = 1,
        .ciphers = or_null(v->https_ciphers),
        .ciphersuites = or_null(v->https_ciphersuites),
        .alpn = alpn,
        .nalpn = 1,
        .handshake_timeout_us = sp_cvar_duration(v->https_handshake_timeout),
        .min_version = sp_cvar_string(v->https_protocols),
        .ktls = sp_cvar_bool(v->https_ktls),
    };
    sp_tls_config_t *tls = sp_tls_server_config(&o);
    if (!tls)
        fprintf(stderr, "%s: https.cert '%s', https.key '%s': %s (%s)\n", spindled_name,
                d->tls_cert, d->tls_key, strerror(errno), sp_tls_error_reason());
    return tls;
}

void spindled_tls_reload(spindled_servers_t *s)
{
    if (!s->tls)
        return;
    sp_logger_t *log = sp_logger("spindled");
    int rc = sp_tls_config_reload(s->tls);
    if (rc < 0)
        SP_LOG_ERROR(log, "https certificate reload failed, old one kept: %s: %s (%s)",
                     s->d->tls_cert, strerror(-rc), sp_tls_error_reason());
    else
        SP_LOG_INFO(log, "https certificate reloaded from %s", s->d->tls_cert);
}

/* The host of a Host header without its port ("[::1]:80" gives "[::1]"),
 * into buf; false when it is missing or holds anything a host name or an
 * address cannot (it goes into a Location header). */
static bool host_only(const char *host, char *buf, size_t size)
{
    if (!host || !*host)
        return false;
    size_t n = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":");
    if (n >= size || (host[0] == '[' && host[n - 1] != ']'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)host[i];
        bool ok = isalnum(c) || c == '-' || c == '.' || c == '_' ||
                  (host[0] == '[' && (c == ':' || c == '[' || c == ']'));
        if (!ok)
            return false;
    }
    snprintf(buf, size, "%.*s", (int)n, host);
    return true;
}

int spindled_redirect(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    const spindled_servers_t *s = arg;
    char host[256], port[16] = "", url[8192];
    if (!host_only(sp_http_request_header(req, "Host"), host, sizeof host))
        return sp_http_response_error(res, 400, NULL, NULL);
    if (s->https_port != 443)
        snprintf(port, sizeof port, ":%d", s->https_port);
    /* Origin form ("/a?b") as sent; any other form (absolute, "*") goes
     * to the root. */
    const char *target = sp_http_request_target(req);
    int n = snprintf(url, sizeof url, "https://%s%s%s", host, port,
                     target[0] == '/' ? target : "/");
    if (n < 0 || (size_t)n >= sizeof url)
        return sp_http_response_error(res, 414, NULL, NULL);
    return sp_http_response_error(res, 308, "Location", url);
}
