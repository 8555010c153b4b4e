/* One generation of a config: the SSL_CTXs made from its files and
 * options. Every SSL_CTX allows TLS 1.2 (unless min_version says 1.3)
 * and 1.3 only, releases its
 * buffers while a connection is idle (SSL_MODE_RELEASE_BUFFERS: an idle
 * connection keeps no 16 KiB record buffers) and refuses renegotiation.
 *
 * A server has one SSL_CTX per certificate, configured alike; every
 * handshake starts on the first, and the SNI callback moves it to the
 * first whose certificate names the requested host. Resumption uses
 * session tickets only (stateless: the server keeps no per-session
 * memory); their keys belong to the first SSL_CTX, where every handshake
 * starts, so a ticket resumes whichever certificate it was issued with. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tls_internal.h"

/* TLS 1.2: forward secrecy and AEAD only. */
static const char default_ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

static const unsigned char session_context[] = "spindle";

/* -errno when path cannot be read, so a missing file is -ENOENT rather
 * than OpenSSL's generic failure. */
static int readable(const char *path, const char *what)
{
    if (access(path, R_OK) == 0)
        return 0;
    int err = errno;
    sp__tls_set_reason(what);
    return -err;
}

/* OpenSSL refused something of ours: -EINVAL with its reason. The first
 * error queued says what was wrong ("no start line" in a file that is no
 * PEM certificate); the later ones only where it surfaced ("PEM lib"). */
static int refused(const char *what)
{
    const char *why = ERR_reason_error_string(ERR_peek_error());
    ERR_clear_error();
    sp__tls_set_reason(why ? why : what);
    return -EINVAL;
}

static bool names(SSL_CTX *ctx, const char *host)
{
    return X509_check_host(SSL_CTX_get0_certificate(ctx), host, 0, 0, NULL) == 1;
}

static int sni_pick(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    const sp__tls_gen_t *g = arg;
    const char *host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!host || names(g->ctx[0], host))
        return SSL_TLSEXT_ERR_OK;
    for (int i = 1; i < g->n; i++)
        if (names(g->ctx[i], host)) {
            SSL_set_SSL_CTX(ssl, g->ctx[i]);
            break;
        }
    return SSL_TLSEXT_ERR_OK;
}

static int alpn_pick(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                     const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl;
    const sp__tls_gen_t *g = arg;
    unsigned char *pick;
    /* The server's list first: its order of preference wins. */
    if (SSL_select_next_proto(&pick, outlen, g->alpn, g->alpn_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = pick;
    return SSL_TLSEXT_ERR_OK;
}

static int ctx_common(const sp_tls_config_t *cfg, SSL_CTX *ctx)
{
    SSL_CTX_set_min_proto_version(ctx, cfg->min_version);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* A TCP end without close_notify reads as end of stream (see
     * sp_tls_read): HTTP and the like frame their messages themselves. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    if (cfg->ktls)
        SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
    if (!SSL_CTX_set_cipher_list(ctx, cfg->ciphers ? cfg->ciphers : default_ciphers))
        return refused("bad cipher list");
    if (cfg->ciphersuites && !SSL_CTX_set_ciphersuites(ctx, cfg->ciphersuites))
        return refused("bad TLS 1.3 cipher suites");
    return 0;
}

static int ctx_server(const sp_tls_config_t *cfg, const sp_tls_cert_t *c, sp__tls_gen_t *g,
                      SSL_CTX *ctx)
{
    int rc = readable(c->cert_file, "cannot read the certificate file");
    if (!rc)
        rc = readable(c->key_file, "cannot read the key file");
    if (rc)
        return rc;
    if (SSL_CTX_use_certificate_chain_file(ctx, c->cert_file) != 1)
        return refused("bad certificate file");
    if (SSL_CTX_use_PrivateKey_file(ctx, c->key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1)
        return refused("bad key file");
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_id_context(ctx, session_context, sizeof session_context - 1);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (cfg->no_resumption) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    SSL_CTX_set_tlsext_servername_callback(ctx, sni_pick);
    SSL_CTX_set_tlsext_servername_arg(ctx, g);
    if (g->alpn)
        SSL_CTX_set_alpn_select_cb(ctx, alpn_pick, g);
    return 0;
}

static int ctx_client(const sp_tls_config_t *cfg, SSL_CTX *ctx)
{
    if (cfg->alpn && SSL_CTX_set_alpn_protos(ctx, cfg->alpn, cfg->alpn_len) != 0)
        return refused("bad ALPN list");
    if (cfg->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return 0;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (!cfg->ca_file)
        return SSL_CTX_set_default_verify_paths(ctx) == 1 ? 0 : refused("no system CA store");
    int rc = readable(cfg->ca_file, "cannot read the CA file");
    if (rc)
        return rc;
    return SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) == 1 ? 0
                                                                      : refused("bad CA file");
}

/* OpenSSL 3.0 decodes a certificate's extensions on its first use in a
 * verification or chain build and keeps them in the certificate, and two
 * threads doing so at once race: one frees what the other reads
 * (ThreadSanitizer showed it in test_https_client: 16 fibers on two
 * threads verifying against one CA). Every certificate the SSL_CTX holds
 * is decoded here, before any handshake can share it; ones the system
 * store loads later from its directory still are on first use. */
static void decode_extensions(SSL_CTX *ctx)
{
    STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
    for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
        X509 *x = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));
        if (x)
            X509_check_purpose(x, -1, 0);
    }
    if (SSL_CTX_get0_certificate(ctx))
        X509_check_purpose(SSL_CTX_get0_certificate(ctx), -1, 0);
    STACK_OF(X509) *chain = NULL;
    if (SSL_CTX_get0_chain_certs(ctx, &chain) == 1)
        for (int i = 0; i < sk_X509_num(chain); i++)
            X509_check_purpose(sk_X509_value(chain, i), -1, 0);
}

static int ctx_make(const sp_tls_config_t *cfg, sp__tls_gen_t *g, int i)
{
    SSL_CTX *ctx = SSL_CTX_new(cfg->server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        sp__tls_reason_from_queue("out of memory");
        return -ENOMEM;
    }
    g->ctx[i] = ctx;
    int rc = ctx_common(cfg, ctx);
    if (rc)
        return rc;
    rc = cfg->server ? ctx_server(cfg, &cfg->certs[i], g, ctx) : ctx_client(cfg, ctx);
    if (!rc)
        decode_extensions(ctx);
    return rc;
}

int sp__tls_gen_build(const sp_tls_config_t *cfg, sp__tls_gen_t **out)
{
    int n = cfg->server ? cfg->ncerts : 1;
    sp__tls_gen_t *g = calloc(1, sizeof *g + (size_t)n * sizeof g->ctx[0]);
    if (!g)
        return -ENOMEM;
    atomic_init(&g->refs, 1);
    g->n = n;
    int rc = 0;
    if (cfg->server && cfg->alpn) {
        g->alpn = malloc(cfg->alpn_len);
        if (!g->alpn)
            rc = -ENOMEM;
        else
            memcpy(g->alpn, cfg->alpn, cfg->alpn_len);
        g->alpn_len = cfg->alpn_len;
    }
    ERR_clear_error();
    for (int i = 0; !rc && i < n; i++)
        rc = ctx_make(cfg, g, i);
    if (rc) {
        sp__tls_gen_unref(g);
        return rc;
    }
    *out = g;
    return 0;
}

sp__tls_gen_t *sp__tls_gen_ref(sp__tls_gen_t *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void sp__tls_gen_unref(sp__tls_gen_t *g)
{
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* Connections still using an SSL_CTX hold OpenSSL's own reference. */
    for (int i = 0; i < g->n; i++)
        SSL_CTX_free(g->ctx[i]);
    free(g->alpn);
    free(g);
}
