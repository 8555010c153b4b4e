/* WebSocket server: the handshake's refusals, echo and the close
 * handshake over raw sockets with exact bytes, every protocol violation
 * answered with its close code, a ping flood, a client gone mid-frame,
 * the idle timeout, and Python's `websockets` as the client. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <spindle/net.h>

#include "ws_fixture.h"

/* A close without a code is answered with one without a code, and the
 * endpoint sees the handshake done. */
static void close_without_code(client_t *c)
{
    put_frame(c, FIN | CLOSE, "", 0, false);
    expect_frame(c, FIN | CLOSE, "", 0);
    assert_closed(c);
    client_close(c);
    expect_report(-ENOTCONN, SP_WS_NO_STATUS);
}

START_TEST(ws_handshake_refusals)
{
    char v[64];
    ck_assert_int_eq(status_of(GET("/ws")), 426);
    resp_t r = once(UPGRADE("/ws", KEY "Sec-WebSocket-Version: 8\r\n"));
    ck_assert_int_eq(r.status, 426);
    ck_assert_str_eq(hdr(&r, "Sec-WebSocket-Version", v, sizeof v), "13");
    resp_free(&r);
    ck_assert_int_eq(status_of(UPGRADE("/ws", V13)), 400); /* no key */
    ck_assert_int_eq(status_of(UPGRADE("/ws", "Sec-WebSocket-Key: abc=\r\n" V13)), 400);
    ck_assert_int_eq(status_of("GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                               "Connection: keep-alive\r\n" KEY V13 "\r\n"),
                     400);
    ck_assert_int_eq(status_of("GET /ws HTTP/1.0\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\n" KEY V13 "\r\n"),
                     400);
    ck_assert_int_eq(status_of("POST /ws HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"),
                     405);
    ck_assert_int_eq(status_of(GET("/hello")), 200);
}
END_TEST

START_TEST(ws_echo_fragments_ping_and_close)
{
    client_t *c = ws_open("/ws?x=7");
    put_frame(c, FIN | TEXT, "hello", 5, false);
    expect_frame(c, FIN | TEXT, "hello", 5);
    put_frame(c, FIN | BINARY, "\0\1\2", 3, false);
    expect_frame(c, FIN | BINARY, "\0\1\2", 3);
    /* A text message in three fragments, a character split across two,
     * and a ping between them. */
    put_frame(c, TEXT, "k\xce", 2, false);
    put_frame(c, FIN | PING, "p1", 2, false);
    put_frame(c, 0, "\xba", 1, false);
    put_frame(c, FIN, "!", 1, false);
    expect_frame(c, FIN | PONG, "p1", 2);
    expect_frame(c, FIN | TEXT, "k\xce\xba!", 4);
    char big[3000];
    memset(big, 'z', sizeof big);
    put_frame(c, FIN | BINARY, big, sizeof big, false);
    expect_frame(c, FIN | BINARY, big, sizeof big);
    put_frame(c, FIN | TEXT, "who", 3, false);
    expect_frame(c, FIN | TEXT, "/ws x=7", 7);
    put_frame(c, FIN | CLOSE, "\x0f\xa0see you", 9, false);
    expect_close(c, 4000);
    expect_report(-ENOTCONN, 4000);
}
END_TEST

START_TEST(ws_server_closes_first)
{
    client_t *c = ws_open("/ws");
    put_frame(c, FIN | TEXT, "close", 5, false);
    expect_frame(c, FIN | CLOSE, "\x0f\xa0" "bye", 5);
    put_frame(c, FIN | CLOSE, "\x0f\xa0", 2, false);
    assert_closed(c);
    client_close(c);
    expect_report(0, 4000);
    /* The upgrade is one answer (1xx), counted once. */
    sp_http_server_stats_t st;
    sp_http_server_stats(S.http, &st);
    ck_assert_uint_eq(st.status[0], 1);
    ck_assert_uint_eq(st.requests, 1);
    ck_assert_uint_eq(st.handler_errors, 0);
}
END_TEST

/* Bytes that break a rule, the close code and the endpoint's result. */
static const struct violation {
    const char *what, *path;
    int b0;
    const char *payload;
    size_t len;
    bool plain;
    int code, rc;
} violations[] = {
    {"unmasked", "/ws", FIN | TEXT, "hi", 2, true, 1002, -EPROTO},
    {"RSV1", "/ws", FIN | 0x40 | TEXT, "hi", 2, false, 1002, -EPROTO},
    {"opcode 3", "/ws", FIN | 3, "", 0, false, 1002, -EPROTO},
    {"opcode 11", "/ws", FIN | 11, "", 0, false, 1002, -EPROTO},
    {"fragmented ping", "/ws", PING, "", 0, false, 1002, -EPROTO},
    {"continuation first", "/ws", FIN, "x", 1, false, 1002, -EPROTO},
    {"bad UTF-8", "/ws", FIN | TEXT, "\xc3\x28", 2, false, 1007, -EILSEQ},
    {"surrogate", "/ws", FIN | TEXT, "\xed\xa0\x80", 3, false, 1007, -EILSEQ},
    {"1-byte close", "/ws", FIN | CLOSE, "\x03", 1, false, 1002, -EPROTO},
    {"close 1005", "/ws", FIN | CLOSE, "\x03\xed", 2, false, 1002, -EPROTO},
    {"close reason", "/ws", FIN | CLOSE, "\x03\xe8\xff", 3, false, 1007, -EILSEQ},
};

START_TEST(ws_violations_get_their_close_code)
{
    for (size_t i = 0; i < sizeof violations / sizeof violations[0]; i++) {
        const struct violation *v = &violations[i];
        fprintf(stderr, "violation: %s\n", v->what);
        client_t *c = ws_open(v->path);
        put_frame(c, v->b0, v->payload, v->len, v->plain);
        expect_close(c, v->code);
        expect_report(v->rc, 0);
    }
}
END_TEST

START_TEST(ws_violations_across_frames)
{
    client_t *c = ws_open("/ws"); /* bad UTF-8 made by two fragments */
    put_frame(c, TEXT, "ok\xc3", 3, false);
    put_frame(c, FIN, "A", 1, false);
    expect_close(c, 1007);
    expect_report(-EILSEQ, 0);
    c = ws_open("/ws"); /* a ping over 125 bytes */
    char x[200] = {0};
    put_frame(c, FIN | PING, x, 126, false);
    expect_close(c, 1002);
    expect_report(-EPROTO, 0);
    c = ws_open("/ws-small"); /* over max_message (1000) in one frame */
    put_frame(c, FIN | BINARY, x, 0, false);
    expect_frame(c, FIN | BINARY, "", 0);
    static const char head[] = "\x82\xfe\x07\xd0\x01\x02\x03\x04"; /* 2000 bytes */
    ck_assert_int_eq(sp_write_full(c->fd, head, 8), 8);
    expect_close(c, 1009);
    expect_report(-EMSGSIZE, 0);
    c = ws_open("/ws-small"); /* ... and in fragments */
    char part[600] = {0};
    put_frame(c, BINARY, part, sizeof part, false);
    put_frame(c, FIN, part, sizeof part, false);
    expect_close(c, 1009);
    expect_report(-EMSGSIZE, 0);
    c = ws_open("/ws"); /* a new message inside another */
    put_frame(c, TEXT, "a", 1, false);
    put_frame(c, FIN | TEXT, "b", 1, false);
    expect_close(c, 1002);
    expect_report(-EPROTO, 0);
}
END_TEST

/* The pongs go out as the pings come: the server holds none of them. */
START_TEST(ws_ping_flood_answered_in_order)
{
    enum { PINGS = 5000 };
    client_t *c = ws_open("/ws");
    size_t n = 0;
    unsigned char *all = malloc(PINGS * 10);
    for (unsigned i = 0; i < PINGS; i++) {
        unsigned char f[10] = {FIN | PING, 0x84, 0, 0, 0, 0, (unsigned char)(i >> 8),
                               (unsigned char)i, 'p', 'g'};
        memcpy(all + n, f, 10);
        n += 10;
    }
    ck_assert_int_eq(sp_write_full(c->fd, all, n), (ssize_t)n);
    free(all);
    for (unsigned i = 0; i < PINGS; i++) {
        unsigned char want[4] = {(unsigned char)(i >> 8), (unsigned char)i, 'p', 'g'};
        expect_frame(c, FIN | PONG, want, 4);
    }
    put_frame(c, FIN | TEXT, "still here", 10, false);
    expect_frame(c, FIN | TEXT, "still here", 10);
    close_without_code(c);
}
END_TEST

START_TEST(ws_client_gone_mid_frame)
{
    client_t *c = ws_open("/ws");
    static const char part[] = "\x82\xe4\x01\x02\x03\x04" "0123456789"; /* of 100 */
    ck_assert_int_eq(sp_write_full(c->fd, part, 16), 16);
    client_close(c);
    expect_report(-ECONNRESET, 0);
    ck_assert_int_eq(status_of(GET("/hello")), 200);
}
END_TEST

START_TEST(ws_idle_timeout_closes_with_1001)
{
    client_t *c = ws_open("/ws-small");
    expect_close(c, 1001);
    expect_report(-ETIMEDOUT, 0);
}
END_TEST

/* Frames sent with the upgrade request, in the same write, are not lost. */
START_TEST(ws_frames_right_after_the_request)
{
    client_t *c = client_open(&S.addr);
    static const char req[] = UPGRADE("/ws", KEY V13) "\x81\x82\0\0\0\0hi";
    ck_assert_int_eq(sp_write_full(c->fd, req, sizeof req - 1), (ssize_t)sizeof req - 1);
    char line[256];
    ck_assert_int_eq(take_line(c, line, sizeof line), 0);
    ck_assert_str_eq(line, "HTTP/1.1 101 Switching Protocols");
    while (take_line(c, line, sizeof line) == 0 && line[0])
        ;
    expect_frame(c, FIN | TEXT, "hi", 2);
    close_without_code(c);
}
END_TEST

static void *stop_server(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_http_server_stop(S.http, 30000000), 0);
    return NULL;
}

/* A stop does not wait out its drain for an open WebSocket: the endpoint
 * sends 1001 (going away) at once and returns. */
START_TEST(ws_stop_says_going_away)
{
    client_t *c = ws_open("/ws");
    put_frame(c, FIN | TEXT, "up", 2, false);
    expect_frame(c, FIN | TEXT, "up", 2);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, stop_server, NULL), 0);
    expect_close(c, 1001);
    expect_report(-ESHUTDOWN, 0);
    pthread_join(t, NULL);
    server_free();
}
END_TEST

START_TEST(ws_python_client_echo)
{
    python_client("client", "/ws");
    expect_report(-ENOTCONN, 4001);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("ws_server");
    ADD_CASE(s, "ws", ws_setup, server_stop, ws_handshake_refusals,
             ws_echo_fragments_ping_and_close, ws_server_closes_first,
             ws_violations_get_their_close_code, ws_violations_across_frames,
             ws_ping_flood_answered_in_order, ws_client_gone_mid_frame,
             ws_idle_timeout_closes_with_1001, ws_frames_right_after_the_request,
             ws_python_client_echo);
    ADD_CASE(s, "stop", ws_setup, NULL, ws_stop_says_going_away);
    return sp_test_run(s);
}
