/* See ws_fixture.h. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/net.h>

#include "ws_fixture.h"

static int report_pipe[2];

typedef struct report {
    int rc, code;
    char reason[124]; /* the peer's close reason */
} report_t;

static void report(sp_ws_t *ws, int rc)
{
    report_t r = {rc, 0, ""};
    const char *reason = "";
    r.code = sp_ws_close_code(ws, &reason);
    snprintf(r.reason, sizeof r.reason, "%s", reason ? reason : "");
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
    /* The same limit without the short idle timeout: for peers that may be
     * slow to send (a Python client on a loaded machine). */
    sp_ws_opts_t limit = {.max_message = 1000};
    ck_assert_int_eq(sp_http_router_add_ws(r, "/ws-limit", &limit, echo, NULL), 0);
    sp_ws_opts_t z = {.deflate = true};
    ck_assert_int_eq(sp_http_router_add_ws(r, "/ws-z", &z, echo, NULL), 0);
    z.deflate_window_bits = 15;
    ck_assert_int_eq(sp_http_router_add_ws(r, "/ws-z15", &z, echo, NULL), 0);
}

static report_t early[16];
static int nearly;

void ws_setup(void)
{
    nearly = 0;
    ck_assert_int_eq(pipe(report_pipe), 0);
    server_extra_routes = ws_routes;
    server_start(NULL);
}

static bool matches(const report_t *r, int rc, int code, const char *reason)
{
    return r->rc == rc && r->code == code && (!reason || !strcmp(r->reason, reason));
}

/* Reports read while looking for another are kept in `early`: endpoints
 * whose connections end close together may finish in either order. */
void expect_report_reason(int rc, int code, const char *reason)
{
    for (int i = 0; i < nearly; i++)
        if (matches(&early[i], rc, code, reason)) {
            early[i] = early[--nearly];
            return;
        }
    for (;;) {
        struct pollfd p = {report_pipe[0], POLLIN, 0};
        ck_assert_msg(poll(&p, 1, 10000) == 1, "no report rc=%d code=%d (%d others)", rc,
                      code, nearly);
        report_t r;
        ck_assert_int_eq(read(report_pipe[0], &r, sizeof r), (ssize_t)sizeof r);
        if (matches(&r, rc, code, reason))
            return;
        ck_assert_int_lt(nearly, 16);
        early[nearly++] = r;
    }
}

void expect_report(int rc, int code)
{
    expect_report_reason(rc, code, NULL);
}

static pid_t peer_pid;
static int peer_stdin;
int peer_port;
FILE *peer_out;

void python_run(const char *script, const char *const *args)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", WS_TEST_DIR, script);
    const char *argv[16] = {WS_PYTHON, path};
    size_t n = 2;
    while (*args && n < 15)
        argv[n++] = *args++;
    argv[n] = NULL;
    int in[2], out[2];
    ck_assert_int_eq(pipe(in), 0);
    ck_assert_int_eq(pipe(out), 0);
    peer_pid = fork();
    ck_assert_int_ge(peer_pid, 0);
    if (peer_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execv(WS_PYTHON, (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    peer_stdin = in[1];
    peer_out = fdopen(out[0], "r");
}

void python_peer_start(const char *const *args)
{
    python_run("ws_peer.py", args);
    ck_assert_int_eq(fscanf(peer_out, "%d", &peer_port), 1); /* bounded by its start */
}

int python_peer_stop(void)
{
    fclose(peer_out);
    close(peer_stdin);
    int status;
    ck_assert_int_eq(waitpid(peer_pid, &status, 0), peer_pid);
    return status;
}

void python_client(const char *mode, const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, WS_PYTHON " %s/ws_peer.py %s ws://127.0.0.1:%d%s", WS_TEST_DIR,
             mode, sp_addr_port(&S.addr), path);
    ck_assert_int_eq(system(cmd), 0);
}

client_t *ws_open_ext(const char *path, const char *extra, char *ext, size_t cap)
{
    client_t *c = client_open(&S.addr);
    char req[1024], line[512];
    snprintf(req, sizeof req, UPGRADE("%s", KEY V13 "%s"), path, extra);
    send_str(c, req);
    ck_assert_int_eq(take_line(c, line, sizeof line), 0);
    ck_assert_str_eq(line, "HTTP/1.1 101 Switching Protocols");
    bool accepted = false;
    static const char name[] = "Sec-WebSocket-Extensions: ";
    if (cap)
        ext[0] = '\0';
    while (take_line(c, line, sizeof line) == 0 && line[0]) {
        accepted |= !strcasecmp(line, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        if (cap && !strncasecmp(line, name, sizeof name - 1))
            snprintf(ext, cap, "%s", line + sizeof name - 1);
    }
    ck_assert(accepted);
    return c;
}

client_t *ws_open(const char *path)
{
    return ws_open_ext(path, "", NULL, 0);
}

void put_frame(client_t *c, int b0, const void *p, size_t n, bool plain)
{
    static const unsigned char key[4] = {0x11, 0x22, 0x33, 0x44};
    unsigned char *f = malloc(n + 14), *at = f;
    *at++ = (unsigned char)b0;
    unsigned char m = plain ? 0 : 0x80;
    if (n < 126) {
        *at++ = (unsigned char)(m | n);
    } else {
        *at++ = m | 126;
        *at++ = (unsigned char)(n >> 8);
        *at++ = (unsigned char)n;
    }
    if (!plain) {
        memcpy(at, key, 4);
        at += 4;
    }
    for (size_t i = 0; i < n; i++)
        *at++ = ((const unsigned char *)p)[i] ^ (plain ? 0 : key[i & 3]);
    ck_assert_int_eq(sp_write_full(c->fd, f, (size_t)(at - f)), at - f);
    free(f);
}

static void need(client_t *c, size_t n)
{
    while (c->len < n)
        ck_assert_int_gt(fill(c), 0);
}

int get_frame(client_t *c, char *out, size_t *len)
{
    need(c, 2);
    unsigned char *b = (unsigned char *)c->buf;
    ck_assert_int_eq(b[1] & 0x80, 0);
    size_t n = b[1] & 127, head = 2;
    if (n == 126) {
        need(c, 4);
        n = (size_t)b[2] << 8 | b[3];
        head = 4;
    }
    need(c, head + n);
    int first = b[0];
    memcpy(out, c->buf + head, n);
    *len = n;
    c->len -= head + n;
    memmove(c->buf, c->buf + head + n, c->len);
    return first;
}

void expect_frame(client_t *c, int b0, const void *p, size_t n)
{
    char got[65536];
    size_t len;
    ck_assert_int_eq(get_frame(c, got, &len), b0);
    ck_assert_uint_eq(len, n);
    ck_assert(!memcmp(got, p, n));
}

void expect_close(client_t *c, int code)
{
    unsigned char want[2] = {(unsigned char)(code >> 8), (unsigned char)code};
    expect_frame(c, FIN | CLOSE, want, 2);
    assert_closed(c);
    client_close(c);
}

