/* The client's side of a WebSocket: connect (over TLS for wss://, with
 * the HTTP client's dialer), send the upgrade request with a random key,
 * and take the 101 answer (parsed by the HTTP client's response parser)
 * only with the Sec-WebSocket-Accept that key asks for. Bytes after the
 * answer are the first frames. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "http_client_internal.h"
#include "ws_internal.h"

enum { READ_SIZE = 4096 };

static int put(sp_buf_t *b, const char *s)
{
    return sp__buf_append(b, s, strlen(s));
}

/* A caller's header line: a token, a colon, no control bytes. */
static bool header_ok(const char *h)
{
    size_t n = sp__http_token_span(h, 256);
    return n && h[n] == ':' && sp__http_field_value_ok(h + n + 1);
}

static int build(sp_buf_t *b, const sp__http_target_t *t, const char *key,
                 const sp_ws_opts_t *o)
{
    const char *const *headers = o->headers;
    int rc = put(b, "GET ");
    rc |= sp__buf_append(b, t->path, t->path_len);
    rc |= sp__buf_append(b, t->query, t->query_len);
    rc |= put(b, " HTTP/1.1\r\nHost: ");
    rc |= put(b, t->host);
    rc |= put(b, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ");
    rc |= put(b, key);
    rc |= put(b, "\r\nSec-WebSocket-Version: 13\r\n");
    rc |= sp__ws_pmd_request(b, o);
    for (; headers && *headers; headers++) {
        if (!header_ok(*headers))
            return -EINVAL;
        rc |= put(b, *headers);
        rc |= put(b, "\r\n");
    }
    rc |= put(b, "\r\n");
    return rc ? -ENOMEM : 0;
}

/* Read the answer to the upgrade: 0 (a valid 101), or -errno; *z the
 * permessage-deflate streams if it agreed to our offer. */
static int read_answer(const sp__http_link_t *l, sp_buf_t *in, const char *key,
                       uint64_t until, const sp_ws_opts_t *o, sp__ws_z_t **z)
{
    sp_http_server_opts_t limits = {.max_header_size = 16384, .max_headers = 100,
                                    .max_body = 1};
    sp_http_request_t m;
    sp__http_msg_init(&m, &limits, true);
    bool drained = false;
    int rc = 1;
    while (rc == 1) {
        sp__http_state_t st = SP__HTTP_MORE;
        if (sp__buf_len(in)) {
            size_t used = sp__http_req_feed(&m, sp__buf_data(in), sp__buf_len(in), &st);
            sp_buf_consume(in, used);
        }
        if (st == SP__HTTP_FAILED)
            rc = -EPROTO;
        else if (st == SP__HTTP_DONE)
            rc = 0;
        else {
            ssize_t n = sp__http_read_lent(l->fd, l->tls, in, NULL, READ_SIZE, until, &drained);
            rc = n > 0 ? 1 : n == 0 ? -ECONNRESET : (int)n;
        }
    }
    char want[29];
    sp__ws_accept(key, want);
    const char *accept = sp_http_request_header(&m, "Sec-WebSocket-Accept");
    if (rc == 0 && (m.status != 101 || !accept || strcmp(accept, want) ||
                    !sp_http_request_header(&m, "Upgrade") ||
                    strcasecmp(sp_http_request_header(&m, "Upgrade"), "websocket")))
        rc = -EPROTO;
    if (rc == 0)
        rc = sp__ws_pmd_answer(sp_http_request_header(&m, "Sec-WebSocket-Extensions"), o, z);
    sp__http_req_free(&m);
    return rc;
}

/* The upgrade on a connection, by `until`: 0, the bytes after it in
 * *rest, *z the permessage-deflate streams if agreed. */
static int handshake(const sp__http_link_t *l, const sp__http_target_t *t,
                     const sp_ws_opts_t *o, uint64_t until, sp_buf_t *rest, sp__ws_z_t **z)
{
    uint8_t raw[16];
    char key[25];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -EIO;
    sp__base64(raw, sizeof raw, key);
    sp__http_out_t out = {.fd = l->fd, .tls = l->tls, .buf = SP_BUF_INIT,
                          .timeout_us = o->connect_timeout_us, .until_ns = until};
    int rc = build(&out.buf, t, key, o);
    rc = rc < 0 ? rc : sp__http_out_flush(&out, NULL, 0);
    sp_buf_free(&out.buf);
    return rc < 0 ? rc : read_answer(l, rest, key, until, o, z);
}

int sp_ws_connect(const char *url, const sp_ws_opts_t *opts, sp_ws_t **out)
{
    sp_ws_opts_t o;
    sp__ws_opts(&o, opts);
    sp__http_target_t t;
    int rc = sp__http_parse_url(url, "ws", &t);
    if (rc < 0)
        return rc;
    sp_ws_t *ws = malloc(sizeof *ws);
    if (!ws)
        return -ENOMEM;
    /* connect_timeout_us bounds the connect, TLS and upgrade together. */
    uint64_t until = sp__http_deadline(o.connect_timeout_us);
    sp__http_link_t l = {-1, NULL};
    sp_buf_t rest = SP_BUF_INIT;
    sp__ws_z_t *z = NULL;
    rc = sp__http_dial(&t, o.tls, o.connect_timeout_us, until, &l);
    rc = rc < 0 ? rc : handshake(&l, &t, &o, until, &rest, &z);
    if (rc < 0) {
        if (l.fd >= 0)
            sp__http_link_close(&l, false);
        sp_buf_free(&rest);
        free(ws);
        return rc;
    }
    sp__ws_init(ws, l.fd, true, &o, &rest);
    ws->out.tls = l.tls; /* frames go through sp_tls_read / sp_tls_write */
    ws->z = ws->rx.z = z;
    *out = ws;
    return 0;
}

void sp_ws_free(sp_ws_t *ws)
{
    if (!ws || !ws->client) /* a server's ws is its connection's */
        return;
    sp__ws_release(ws); /* its read timer first: it watches the fd */
    sp__http_link_close(&(sp__http_link_t){ws->fd, ws->out.tls}, true);
    free(ws);
}
