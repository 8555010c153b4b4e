/* WebSocket client: against Python's `websockets` server and against the
 * in-process server (large messages, timeouts, limits, the close
 * handshake from either side), and its refusals (URLs, a server that does
 * not upgrade). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ws_fixture.h"

static char url_text[256];

static const char *ws_url(int port, const char *path)
{
    snprintf(url_text, sizeof url_text, "ws://127.0.0.1:%d%s", port, path);
    return url_text;
}

static void send_text(sp_ws_t *ws, const char *text)
{
    ck_assert_int_eq(sp_ws_send(ws, SP_WS_TEXT, text, strlen(text)), 0);
}

static void expect_echo(sp_ws_t *ws, sp_ws_type_t type, const void *p, size_t n)
{
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), 0);
    ck_assert_int_eq(m.type, type);
    ck_assert_uint_eq(m.len, n);
    ck_assert(!memcmp(m.data, p, n));
}

static void round_trip(sp_ws_t *ws, sp_ws_type_t type, const void *p, size_t n)
{
    ck_assert_int_eq(sp_ws_send(ws, type, p, n), 0);
    expect_echo(ws, type, p, n);
}

/* ---- against Python's server ---------------------------------------------- */

static void against_python(void *arg)
{
    (void)arg;
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(ws_url(peer_port, "/"), NULL, &ws), 0);
    round_trip(ws, SP_WS_TEXT, "hello, \xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", 18);
    round_trip(ws, SP_WS_BINARY, "\0\1\2\3", 4);
    size_t n = 900 * 1024;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i * 7);
    round_trip(ws, SP_WS_BINARY, big, n);
    free(big);
    ck_assert_int_eq(sp_ws_ping(ws, "hb", 2), 0);
    round_trip(ws, SP_WS_TEXT, "after the ping", 14);
    ck_assert_uint_eq(sp_ws_pongs(ws), 1); /* the pong came before the echo */
    send_text(ws, "close-me");
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), -ENOTCONN);
    const char *reason;
    ck_assert_int_eq(sp_ws_close_code(ws, &reason), 4002);
    ck_assert_str_eq(reason, "bye");
    ck_assert_int_eq(sp_ws_send(ws, SP_WS_TEXT, "x", 1), -ENOTCONN);
    sp_ws_free(ws);

    ck_assert_int_eq(sp_ws_connect(ws_url(peer_port, "/"), NULL, &ws), 0);
    round_trip(ws, SP_WS_TEXT, "", 0);
    ck_assert_int_eq(sp_ws_close(ws, 1000, "done"), 0);
    ck_assert_int_eq(sp_ws_close_code(ws, NULL), 1000);
    sp_ws_free(ws);
}

/* On the test's own thread: the waits block it (poll) instead of parking. */
static void on_plain_thread(void)
{
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(ws_url(peer_port, "/"), NULL, &ws), 0);
    round_trip(ws, SP_WS_TEXT, "from a thread", 13);
    ck_assert_int_eq(sp_ws_close(ws, 1000, NULL), 0);
    sp_ws_free(ws);
}

START_TEST(ws_client_against_python_server)
{
    python_peer_start((const char *[]){"server", NULL});
    run_fibers(against_python, 1);
    on_plain_thread();
    python_peer_stop();
}
END_TEST

/* A server's frame must not be masked: the client closes with 1002. */
START_TEST(ws_client_refuses_masked_server_frames)
{
    python_peer_start((const char *[]){"masked", NULL});
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(ws_url(peer_port, "/"), NULL, &ws), 0);
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), -EPROTO);
    sp_ws_free(ws);
    int code = 0;
    ck_assert_int_eq(fscanf(peer_out, "%d", &code), 1);
    ck_assert_int_eq(code, 1002);
    python_peer_stop();
}
END_TEST

/* ---- against the in-process server ------------------------------------------ */

static void against_spindle(void *arg)
{
    (void)arg;
    int port = sp_addr_port(&S.addr);
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/ws?x=5"), NULL, &ws), 0);
    size_t n = 1000 * 1000;
    char *big = malloc(n);
    memset(big, 'q', n);
    round_trip(ws, SP_WS_BINARY, big, n);
    free(big);
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 20000), -EAGAIN); /* nothing came: still open */
    send_text(ws, "who");
    expect_echo(ws, SP_WS_TEXT, "/ws x=5", 7);
    ck_assert_int_eq(sp_ws_send(ws, SP_WS_TEXT, "\xc3\x28", 2), -EILSEQ);
    ck_assert_int_eq(sp_ws_send(ws, 3, "", 0), -EINVAL);
    char x[126] = {0};
    ck_assert_int_eq(sp_ws_ping(ws, x, sizeof x), -EINVAL);
    ck_assert_int_eq(sp_ws_close(ws, 1005, NULL), -EINVAL);
    ck_assert_int_eq(sp_ws_close(ws, 0, "reason without code"), -EINVAL);
    ck_assert_int_eq(sp_ws_ping(ws, "p", 1), 0);
    round_trip(ws, SP_WS_TEXT, "t", 1);
    ck_assert_uint_eq(sp_ws_pongs(ws), 1);
    ck_assert_int_eq(sp_ws_close(ws, 4100, "client done"), 0);
    ck_assert_int_eq(sp_ws_close_code(ws, NULL), 4100);
    ck_assert_int_eq(sp_ws_recv(ws, &m, 0), -ENOTCONN);
    sp_ws_free(ws);

    /* The server closes first. */
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/ws"), NULL, &ws), 0);
    send_text(ws, "close");
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), -ENOTCONN);
    ck_assert_int_eq(sp_ws_close_code(ws, NULL), 4000);
    sp_ws_free(ws);

    /* Our own limit: an echo over it ends the connection with 1009. */
    sp_ws_opts_t small = {.max_message = 100};
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/ws"), &small, &ws), 0);
    char msg[200] = {0};
    ck_assert_int_eq(sp_ws_send(ws, SP_WS_BINARY, msg, sizeof msg), 0);
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), -EMSGSIZE);
    sp_ws_free(ws);

    /* Not upgraded, neither ws:// nor wss://, nobody there. */
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/hello"), NULL, &ws), -EPROTO);
    ck_assert_int_eq(sp_ws_connect("http://127.0.0.1/", NULL, &ws), -EPROTONOSUPPORT);
    ck_assert_int_eq(sp_ws_connect("wsx://127.0.0.1/", NULL, &ws), -EPROTONOSUPPORT);
    ck_assert_int_eq(sp_ws_connect("https://127.0.0.1/", NULL, &ws), -EPROTONOSUPPORT);
    ck_assert_int_eq(sp_ws_connect("ws://", NULL, &ws), -EINVAL);
    const char *bad[] = {"X-Bad header: 1", NULL};
    sp_ws_opts_t o = {.headers = bad};
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/ws"), &o, &ws), -EINVAL);
}

START_TEST(ws_client_against_spindle_server)
{
    run_fibers(against_spindle, 1);
    expect_report(-ENOTCONN, 4100);
    expect_report(0, 4000);
    expect_report(-ENOTCONN, 1009);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("ws_client");
    ADD_CASE(s, "python", NULL, NULL, ws_client_against_python_server,
             ws_client_refuses_masked_server_frames);
    ADD_CASE(s, "spindle", ws_setup, server_stop, ws_client_against_spindle_server);
    return sp_test_run(s);
}
