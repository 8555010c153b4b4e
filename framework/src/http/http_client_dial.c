/* Where a client connects and how: the URL's parts, the TCP connection
 * and, for https:// and wss://, the TLS handshake over it (the same TLS
 * layer as the server's: sp_tls_connect sends the host as SNI and checks
 * that the certificate names it). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http_client_internal.h"
#include "http_internal.h"

/* The URL's parts (http_client_internal.h). */
int sp__http_parse_url(const char *url, const char *plain, sp__http_target_t *t)
{
    struct http_parser_url u;
    http_parser_url_init(&u);
    size_t len = url ? strlen(url) : 0;
    if (!url || sp__http_has_control(url, len) || http_parser_parse_url(url, len, 0, &u) ||
        !(u.field_set & (1 << UF_SCHEMA)) || !(u.field_set & (1 << UF_HOST)) ||
        (u.field_set & (1 << UF_USERINFO)))
        return -EINVAL;
    size_t sl = u.field_data[UF_SCHEMA].len, pl = strlen(plain);
    const char *s = url + u.field_data[UF_SCHEMA].off;
    if ((sl != pl && sl != pl + 1) || strncasecmp(s, plain, pl) ||
        (sl == pl + 1 && (s[pl] | 0x20) != 's'))
        return -EPROTONOSUPPORT;
    t->tls = sl == pl + 1;
    unsigned default_port = t->tls ? 443 : 80;
    int hl = u.field_data[UF_HOST].len;
    const char *h = url + u.field_data[UF_HOST].off;
    bool v6 = memchr(h, ':', (size_t)hl) != NULL;
    unsigned port = (u.field_set & (1 << UF_PORT)) ? u.port : default_port;
    int n = snprintf(t->key, sizeof t->key, "%s%.*s%s:%u", v6 ? "[" : "", hl, h, v6 ? "]" : "", port);
    if (n >= (int)sizeof t->key || hl >= (int)sizeof t->name)
        return -EINVAL;
    memcpy(t->host, t->key, (size_t)n + 1);
    if (port == default_port)
        *strrchr(t->host, ':') = '\0';
    memcpy(t->name, h, (size_t)hl);
    t->name[hl] = '\0';
    t->path = "/";
    t->path_len = 1;
    t->query = "";
    t->query_len = 0;
    if (u.field_set & (1 << UF_PATH)) {
        t->path = url + u.field_data[UF_PATH].off;
        t->path_len = u.field_data[UF_PATH].len;
    }
    if (u.field_set & (1 << UF_QUERY)) { /* "http://h?q" asks for "/?q" */
        t->query = url + u.field_data[UF_QUERY].off - 1; /* with its '?' */
        t->query_len = u.field_data[UF_QUERY].len + 1u;
    }
    return 0;
}

/* One default client config for the whole process: every client without
 * a config of its own verifies against the system store the same way, so
 * they share one (reading the store's settings once). Made by the first
 * caller that needs it; a racing second one frees its own. It lives as
 * long as the process. */
static _Atomic(sp_tls_config_t *) default_config;

static int default_tls(sp_tls_config_t **out)
{
    sp_tls_config_t *cfg = atomic_load(&default_config);
    if (!cfg) {
        sp_tls_config_t *mine = sp_tls_client_config(NULL);
        if (!mine)
            return errno ? -errno : -ENOMEM;
        if (atomic_compare_exchange_strong(&default_config, &cfg, mine))
            cfg = mine;
        else
            sp_tls_config_free(mine); /* cfg is the winner's */
    }
    *out = cfg;
    return 0;
}

static int handshake(const sp__http_target_t *t, sp_tls_config_t *cfg, uint64_t deadline,
                     sp__http_link_t *l)
{
    int rc = cfg ? 0 : default_tls(&cfg);
    int64_t us = sp__http_left_us(deadline);
    if (rc == 0 && us == 0)
        rc = -ETIMEDOUT;
    return rc < 0 ? rc : sp_tls_connect(cfg, l->fd, t->name, us, &l->tls);
}

int sp__http_dial(const sp__http_target_t *t, sp_tls_config_t *cfg, int64_t timeout_us,
                  uint64_t until_ns, sp__http_link_t *out)
{
    sp_addr_t a;
    int n = sp_addr_resolve(t->key, &a, 1);
    if (n < 1)
        return n < 0 ? n : -ENOENT;
    /* One deadline for the connect and the handshake together. */
    int64_t us = sp__http_cut_us(timeout_us, until_ns);
    if (us == 0)
        return -ETIMEDOUT;
    uint64_t deadline = sp__http_deadline(us);
    sp__http_link_t l = {sp_connect(&a, us), NULL};
    if (l.fd < 0)
        return l.fd;
    sp_set_nodelay(l.fd, true);
    int rc = t->tls ? handshake(t, cfg, deadline, &l) : 0;
    if (rc < 0) {
        sp_io_close(l.fd);
        return rc;
    }
    *out = l;
    return 0;
}

void sp__http_link_close(sp__http_link_t *l, bool notify)
{
    if (l->tls && notify)
        sp_tls_shutdown(l->tls, 0); /* 0: no wait, whatever the socket takes now */
    sp_tls_free(l->tls);
    sp_io_close(l->fd);
    *l = (sp__http_link_t){-1, NULL};
}
