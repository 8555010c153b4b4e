/* See ws_fixture.h. */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ws_fixture.h"

static int report_pipe[2];

typedef struct report {
    int rc, code;
} report_t;

static void report(sp_ws_t *ws, int rc)
{
    report_t r = {rc, sp_ws_close_code(ws, NULL)};
    ck_assert_int_eq(write(report_pipe[1], &r, sizeof r), (ssize_t)sizeof r);
}

static bool is(const sp_ws_msg_t *m, const char *text)
{
    return m->type == SP_WS_TEXT && m->len == strlen(text) && !memcmp(m->data, text, m->len);
}

static void echo(sp_ws_t *ws, void *arg)
{
    (void)arg;
    sp_ws_msg_t m;
    int rc;
    while ((rc = sp_ws_recv(ws, &m, -1)) == 0) {
        if (is(&m, "close")) {
            rc = sp_ws_close(ws, 4000, "bye");
            break;
        }
        if (is(&m, "who")) {
            sp_http_request_t *req = sp_ws_request(ws);
            char text[128];
            const char *x = sp_http_request_param(req, "x");
            int n = snprintf(text, sizeof text, "%s x=%s", sp_http_request_path(req),
                             x ? x : "-");
            rc = sp_ws_send(ws, SP_WS_TEXT, text, (size_t)n);
        } else {
            rc = sp_ws_send(ws, m.type, m.data, m.len);
        }
        if (rc < 0)
            break;
    }
    report(ws, rc);
}

static void ws_routes(sp_http_router_t *r)
{
    ck_assert_int_eq(sp_http_router_add_ws(r, "/ws", NULL, echo, NULL), 0);
    sp_ws_opts_t small = {.max_message = 1000, .idle_timeout_us = 300000,
                          .close_timeout_us = 1000000};
    ck_assert_int_eq(sp_http_router_add_ws(r, "/ws-small", &small, echo, NULL), 0);
}

void ws_setup(void)
{
    ck_assert_int_eq(pipe(report_pipe), 0);
    server_extra_routes = ws_routes;
    server_start(NULL);
}

void expect_report(int rc, int code)
{
    struct pollfd p = {report_pipe[0], POLLIN, 0};
    ck_assert_int_eq(poll(&p, 1, 10000), 1);
    report_t r;
    ck_assert_int_eq(read(report_pipe[0], &r, sizeof r), (ssize_t)sizeof r);
    ck_assert_int_eq(r.rc, rc);
    ck_assert_int_eq(r.code, code);
}
