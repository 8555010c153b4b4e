/* Configs: the caller's options copied (to read the files again on
 * reload) and the current generation of SSL_CTXs, swapped under a lock
 * that is held only for the swap or to take a reference. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tls_internal.h"

#define HANDSHAKE_US_DEFAULT 10000000

static void config_free(sp_tls_config_t *cfg)
{
    if (cfg->gen)
        sp__tls_gen_unref(cfg->gen);
    for (int i = 0; cfg->certs && i < cfg->ncerts; i++) {
        free((char *)cfg->certs[i].cert_file);
        free((char *)cfg->certs[i].key_file);
    }
    free(cfg->certs);
    free(cfg->ciphers);
    free(cfg->ciphersuites);
    free(cfg->ca_file);
    free(cfg->alpn);
    pthread_mutex_destroy(&cfg->lock);
    free(cfg);
}

/* strdup of an optional string; -ENOMEM lands in *rc. */
static char *copy(const char *s, int *rc)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d)
        *rc = -ENOMEM;
    return d;
}

/* ALPN names in the wire format: each name after its length byte. */
static int alpn_wire(sp_tls_config_t *cfg, const char *const *list, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t l = list && list[i] ? strlen(list[i]) : 0;
        if (l == 0 || l > 255) {
            sp__tls_set_reason("bad ALPN name");
            return -EINVAL;
        }
        len += 1 + l;
    }
    if (len == 0)
        return 0;
    if (len > 0xffff)
        return -EINVAL;
    unsigned char *p = cfg->alpn = malloc(len);
    if (!p)
        return -ENOMEM;
    cfg->alpn_len = (unsigned)len;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(list[i]);
        *p++ = (unsigned char)l;
        memcpy(p, list[i], l);
        p += l;
    }
    return 0;
}

/* Copy the options both kinds share, then read the files. */
static sp_tls_config_t *config_make(sp_tls_config_t *cfg, const char *ciphers,
                                    const char *suites, const char *const *alpn, int nalpn,
                                    int64_t handshake_us, int rc)
{
    cfg->handshake_us = handshake_us > 0 ? handshake_us : HANDSHAKE_US_DEFAULT;
    cfg->ciphers = copy(ciphers, &rc);
    cfg->ciphersuites = copy(suites, &rc);
    if (!rc && nalpn < 0)
        rc = -EINVAL;
    if (!rc)
        rc = alpn_wire(cfg, alpn, nalpn);
    if (!rc)
        rc = sp__tls_gen_build(cfg, &cfg->gen);
    if (rc) {
        config_free(cfg);
        errno = -rc;
        return NULL;
    }
    if (cfg->ktls)
        sp__tls_ktls_report();
    return cfg;
}

static sp_tls_config_t *config_new(bool server)
{
    sp_tls_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    pthread_mutex_init(&cfg->lock, NULL);
    cfg->server = server;
    cfg->min_version = TLS1_2_VERSION;
    return cfg;
}

/* min_version's text as OpenSSL's number; 0 for a text it cannot be. */
static int version_number(const char *text)
{
    if (!text || !strcmp(text, "TLSv1.2"))
        return TLS1_2_VERSION;
    return !strcmp(text, "TLSv1.3") ? TLS1_3_VERSION : 0;
}

sp_tls_config_t *sp_tls_server_config(const sp_tls_server_opts_t *o)
{
    sp__tls_set_reason(NULL);
    if (!o || !o->certs || o->ncerts <= 0) {
        errno = EINVAL;
        return NULL;
    }
    sp_tls_config_t *cfg = config_new(true);
    if (!cfg || !(cfg->certs = calloc((size_t)o->ncerts, sizeof *cfg->certs))) {
        free(cfg);
        errno = ENOMEM;
        return NULL;
    }
    int rc = 0;
    cfg->ncerts = o->ncerts;
    for (int i = 0; i < o->ncerts; i++) {
        if (!o->certs[i].cert_file || !o->certs[i].key_file)
            rc = -EINVAL;
        cfg->certs[i].cert_file = copy(o->certs[i].cert_file, &rc);
        cfg->certs[i].key_file = copy(o->certs[i].key_file, &rc);
    }
    cfg->no_resumption = o->no_resumption;
    cfg->ktls = o->ktls;
    if (!(cfg->min_version = version_number(o->min_version))) {
        sp__tls_set_reason("bad min_version (TLSv1.2 or TLSv1.3)");
        rc = -EINVAL;
    }
    return config_make(cfg, o->ciphers, o->ciphersuites, o->alpn, o->nalpn,
                       o->handshake_timeout_us, rc);
}

sp_tls_config_t *sp_tls_client_config(const sp_tls_client_opts_t *opts)
{
    sp__tls_set_reason(NULL);
    sp_tls_client_opts_t o = opts ? *opts : (sp_tls_client_opts_t){0};
    sp_tls_config_t *cfg = config_new(false);
    if (!cfg) {
        errno = ENOMEM;
        return NULL;
    }
    int rc = 0;
    cfg->ca_file = copy(o.ca_file, &rc);
    cfg->insecure = o.insecure;
    cfg->ktls = o.ktls;
    return config_make(cfg, o.ciphers, o.ciphersuites, o.alpn, o.nalpn,
                       o.handshake_timeout_us, rc);
}

int sp_tls_config_reload(sp_tls_config_t *cfg)
{
    if (!cfg)
        return -EINVAL;
    sp__tls_set_reason(NULL);
    sp__tls_gen_t *g;
    int rc = sp__tls_gen_build(cfg, &g);
    if (rc)
        return rc;
    pthread_mutex_lock(&cfg->lock);
    sp__tls_gen_t *old = cfg->gen;
    cfg->gen = g;
    pthread_mutex_unlock(&cfg->lock);
    sp__tls_gen_unref(old);
    return 0;
}

sp__tls_gen_t *sp__tls_config_gen(sp_tls_config_t *cfg)
{
    pthread_mutex_lock(&cfg->lock);
    sp__tls_gen_t *g = sp__tls_gen_ref(cfg->gen);
    pthread_mutex_unlock(&cfg->lock);
    return g;
}

void sp_tls_config_free(sp_tls_config_t *cfg)
{
    if (cfg)
        config_free(cfg);
}
