/* The server's side of a WebSocket: the upgrade handshake (RFC 6455 4.2)
 * checked and answered inside a handler, then the connection's fiber runs
 * the endpoint's function on the connection it now owns. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ws_internal.h"

/* Does a comma-separated header value hold `token` (any case)? */
static bool has_token(const char *v, const char *token)
{
    size_t n = strlen(token);
    while (v && *v) {
        v += strspn(v, " \t,");
        size_t len = strcspn(v, ",");
        size_t end = len;
        while (end && (v[end - 1] == ' ' || v[end - 1] == '\t'))
            end--;
        if (end == n && !strncasecmp(v, token, n))
            return true;
        v += len;
    }
    return false;
}

/* The answer to a bad handshake, or 0 to go ahead. */
static int check(sp_http_request_t *req, sp_http_response_t *res)
{
    if (sp_http_request_method(req) != SP_HTTP_GET)
        return sp_http_response_error(res, 405, "Allow", "GET");
    if (!has_token(sp_http_request_header(req, "Upgrade"), "websocket"))
        return sp_http_response_error(res, 426, "Upgrade", "websocket");
    size_t body;
    sp_http_request_body(req, &body);
    uint8_t raw[16];
    const char *key = sp_http_request_header(req, "Sec-WebSocket-Key");
    if (sp_http_request_version(req) < 11 || body || !req->complete ||
        !has_token(sp_http_request_header(req, "Connection"), "upgrade") || !key ||
        sp__base64_decode(key, raw, sizeof raw) != (int)sizeof raw)
        return sp_http_response_error(res, 400, NULL, NULL);
    const char *version = sp_http_request_header(req, "Sec-WebSocket-Version");
    if (!version || strcmp(version, "13"))
        return sp_http_response_error(res, 426, "Sec-WebSocket-Version", "13");
    return 1;
}

/* permessage-deflate when the endpoint allows it and an offer (in any
 * Sec-WebSocket-Extensions line) can be honoured: its streams, and the
 * answer's header line in `line`; NULL and "" otherwise. */
static sp__ws_z_t *deflate_offer(sp_http_request_t *req, const sp_ws_opts_t *o,
                                 char line[SP__WS_PMD_TEXT + 32])
{
    line[0] = '\0';
    size_t n = o->deflate ? sp_http_request_nheaders(req) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *name, *value;
        char answer[SP__WS_PMD_TEXT];
        sp__ws_pmd_t p;
        if (sp_http_request_header_at(req, i, &name, &value) < 0 ||
            strcasecmp(name, "Sec-WebSocket-Extensions") ||
            !sp__ws_pmd_accept(value, o->deflate_window_bits, &p, answer))
            continue;
        sp__ws_z_t *z = sp__ws_z_new(&p, false);
        if (z) /* out of memory: declined, the connection goes on without */
            snprintf(line, SP__WS_PMD_TEXT + 32, "Sec-WebSocket-Extensions: %s\r\n", answer);
        return z;
    }
    return NULL;
}

int sp_ws_serve(sp_http_request_t *req, sp_http_response_t *res,
                const sp_ws_opts_t *opts, sp_ws_fn fn, void *arg)
{
    int rc = check(req, res);
    if (rc <= 0)
        return rc;
    sp_ws_opts_t o;
    sp__ws_opts(&o, opts);
    char accept[29], head[384 + SP__WS_PMD_TEXT + 32], ext[SP__WS_PMD_TEXT + 32];
    sp__ws_z_t *z = deflate_offer(req, &o, ext);
    sp__ws_accept(sp_http_request_header(req, "Sec-WebSocket-Key"), accept);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s%s\r\n",
                     accept, ext, res->server_line);
    sp_buf_t rest = SP_BUF_INIT;
    int fd = sp__http_take_over(req, head, (size_t)n, &rest);
    if (fd < 0) {
        sp__ws_z_free(z);
        sp_buf_free(&rest);
        return 0; /* the client is gone: the connection just closes */
    }
    sp_ws_t ws;
    sp__ws_init(&ws, fd, false, &o, &rest);
    ws.z = ws.rx.z = z;
    ws.out.tls = res->out->tls; /* wss: the connection's TLS session */
    ws.req = req;
    ws.stopping = res->stopping;
    fn(&ws, arg);
    if (!ws.closed)
        sp_ws_close(&ws, SP_WS_NORMAL, NULL);
    sp__ws_release(&ws);
    return 0;
}

typedef struct ws_route {
    sp_ws_opts_t opts;
    sp_ws_fn fn;
    void *arg;
} ws_route_t;

static int ws_route(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    ws_route_t *w = arg;
    return sp_ws_serve(req, res, &w->opts, w->fn, w->arg);
}

int sp_http_router_add_ws(sp_http_router_t *r, const char *pattern,
                          const sp_ws_opts_t *opts, sp_ws_fn fn, void *arg)
{
    if (!fn)
        return -EINVAL;
    ws_route_t *w = malloc(sizeof *w);
    if (!w)
        return -ENOMEM;
    *w = (ws_route_t){opts ? *opts : (sp_ws_opts_t){0}, fn, arg};
    int rc = sp__http_router_add_owned(r, SP_HTTP_EXACT, pattern, SP_HTTP_M_GET, ws_route,
                                       w, true);
    if (rc < 0)
        free(w);
    return rc;
}
