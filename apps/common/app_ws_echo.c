/* See apps_common.h: the WebSocket echo endpoint. */
#include <spindle/websocket.h>

#include "apps_common.h"

/* Every message back as it came, until the peer closes or breaks a rule
 * (sp_ws_recv then has answered it already). */
static void ws_echo(sp_ws_t *ws, void *arg)
{
    (void)arg;
    sp_ws_msg_t m;
    while (sp_ws_recv(ws, &m, -1) == 0 && sp_ws_send(ws, m.type, m.data, m.len) == 0)
        ;
}

int app_add_ws_echo(sp_http_router_t *r, const char *path, bool deflate)
{
    sp_ws_opts_t o = {.deflate = deflate};
    return sp_http_router_add_ws(r, path, &o, ws_echo, NULL);
}
