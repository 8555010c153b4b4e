/* WebSocket permessage-deflate (RFC 7692): the server's answers to offers
 * and its compressed frames over raw sockets (compressed here with zlib
 * as a client would), the frames it refuses with their close codes (RSV1
 * out of place, bad deflate data, bad UTF-8 inside, a deflate bomb), and
 * Python's `websockets` with compression as the client and as the server
 * of ours; the client's refusal of answers it did not offer. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ws_fixture.h"

#define OFFER(v) "Sec-WebSocket-Extensions: " v "\r\n"

/* One message compressed as a client without context takeover would:
 * raw deflate, 15-bit window, the 00 00 ff ff tail cut. Its length. */
static size_t zc(const void *p, size_t n, unsigned char *out, size_t cap)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(deflateInit2(&s, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    s.next_in = (Bytef *)p;
    s.avail_in = (uInt)n;
    s.next_out = out;
    s.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&s, Z_SYNC_FLUSH), Z_OK);
    ck_assert_uint_gt(s.avail_out, 0);
    size_t len = cap - s.avail_out;
    deflateEnd(&s);
    ck_assert(len >= 4 && !memcmp(out + len - 4, "\0\0\xff\xff", 4));
    return len - 4;
}

/* The server's compressed messages, inflated with one stream (its
 * context carries over between messages). */
static z_stream from_server;

static void zd_open(void)
{
    memset(&from_server, 0, sizeof from_server);
    ck_assert_int_eq(inflateInit2(&from_server, -15), Z_OK);
}

static size_t zd(const char *p, size_t n, char *out, size_t cap)
{
    char in[70000];
    memcpy(in, p, n);
    memcpy(in + n, "\0\0\xff\xff", 4);
    from_server.next_in = (Bytef *)in;
    from_server.avail_in = (uInt)n + 4;
    from_server.next_out = (Bytef *)out;
    from_server.avail_out = (uInt)cap;
    ck_assert_int_eq(inflate(&from_server, Z_SYNC_FLUSH), Z_OK);
    ck_assert_uint_eq(from_server.avail_in, 0);
    return cap - from_server.avail_out;
}

/* The next frame is a compressed message (b0: FIN, RSV1, opcode) of
 * p[0, n): its length on the wire. */
static size_t expect_deflated(client_t *c, int b0, const void *p, size_t n)
{
    static char got[65536], plain[200000];
    size_t len;
    ck_assert_int_eq(get_frame(c, got, &len), b0);
    ck_assert_uint_eq(zd(got, len, plain, sizeof plain), n);
    ck_assert(!memcmp(plain, p, n));
    return len;
}

static void bye(client_t *c)
{
    put_frame(c, FIN | CLOSE, "\x03\xe8", 2, false);
    expect_close(c, 1000);
    expect_report(-ENOTCONN, 1000);
}

/* Open with an offer; the answer must be `want` ("" none). */
static client_t *offer(const char *path, const char *lines, const char *want)
{
    char ext[256];
    client_t *c = ws_open_ext(path, lines, ext, sizeof ext);
    ck_assert_str_eq(ext, want);
    return c;
}

START_TEST(ws_deflate_answers_offers)
{
    bye(offer("/ws-z", OFFER("permessage-deflate; client_max_window_bits"),
              "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"));
    bye(offer("/ws-z15", OFFER("permessage-deflate"), "permessage-deflate"));
    /* Offers in two header lines: one that cannot be honoured (a
     * 256-byte window), then one that can. */
    bye(offer("/ws-z",
              OFFER("permessage-deflate; server_max_window_bits=8")
                  OFFER("permessage-deflate; server_no_context_takeover"),
              "permessage-deflate; server_no_context_takeover; server_max_window_bits=12"));
    /* Malformed: declined, and messages go uncompressed. */
    client_t *c = offer("/ws-z", OFFER("permessage-deflate; client_max_window_bits=16"), "");
    char text[100];
    memset(text, 't', sizeof text);
    put_frame(c, FIN | TEXT, text, sizeof text, false);
    expect_frame(c, FIN | TEXT, text, sizeof text);
    bye(c);
    /* An endpoint without deflate answers no offer. */
    bye(offer("/ws", OFFER("permessage-deflate"), ""));
}
END_TEST

START_TEST(ws_deflate_echo_raw)
{
    client_t *c = offer("/ws-z", OFFER("permessage-deflate; client_no_context_takeover"),
                        "permessage-deflate; client_no_context_takeover; "
                        "server_max_window_bits=12");
    zd_open();
    static char text[200], bin[3000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "spindle "[i % 8];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (char)(i % 251);
    unsigned char z[4096];
    size_t n = zc(text, sizeof text, z, sizeof z);
    put_frame(c, FIN | RSV1 | TEXT, z, n, false);
    size_t first = expect_deflated(c, FIN | RSV1 | TEXT, text, sizeof text);
    put_frame(c, FIN | RSV1 | TEXT, z, n, false);
    /* The server takes its context over: the same message again is a
     * back reference. */
    ck_assert_uint_lt(expect_deflated(c, FIN | RSV1 | TEXT, text, sizeof text), first);
    /* In two fragments, RSV1 on the first only. */
    n = zc(bin, sizeof bin, z, sizeof z);
    put_frame(c, RSV1 | BINARY, z, n / 2, false);
    put_frame(c, FIN, z + n / 2, n - n / 2, false);
    expect_deflated(c, FIN | RSV1 | BINARY, bin, sizeof bin);
    /* Uncompressed messages are fine too; short ones come back as they are. */
    put_frame(c, FIN | BINARY, bin, sizeof bin, false);
    expect_deflated(c, FIN | RSV1 | BINARY, bin, sizeof bin);
    n = zc("short", 5, z, sizeof z);
    put_frame(c, FIN | RSV1 | TEXT, z, n, false);
    expect_frame(c, FIN | TEXT, "short", 5);
    inflateEnd(&from_server);
    bye(c);
}
END_TEST

static client_t *deflating(void)
{
    return offer("/ws-z15", OFFER("permessage-deflate"), "permessage-deflate");
}

/* Closed by the server with code, its endpoint's sp_ws_recv failing. */
static void closed_with(client_t *c, int code)
{
    expect_close(c, code);
    expect_report(code == 1002 ? -EPROTO : code == 1007 ? -EILSEQ : -EMSGSIZE, 0);
}

START_TEST(ws_deflate_violations_get_their_close_code)
{
    static unsigned char z[65536];
    /* RSV1 without the extension. */
    client_t *c = offer("/ws-z", "", "");
    size_t n = zc("hello", 5, z, sizeof z);
    put_frame(c, FIN | RSV1 | TEXT, z, n, false);
    closed_with(c, 1002);
    /* RSV1 on a control frame, on a continuation; not deflate data. */
    put_frame(c = deflating(), FIN | RSV1 | PING, "", 0, false);
    closed_with(c, 1002);
    put_frame(c = deflating(), RSV1 | TEXT, z, n, false);
    put_frame(c, FIN | RSV1, "", 0, false);
    closed_with(c, 1002);
    put_frame(c = deflating(), FIN | RSV1 | BINARY, "\xff\xff\xff", 3, false);
    closed_with(c, 1002);
    /* Text that inflates to bad UTF-8. */
    char bad[300];
    memset(bad, 'b', sizeof bad);
    bad[200] = (char)0xc3;
    n = zc(bad, sizeof bad, z, sizeof z);
    put_frame(c = deflating(), FIN | RSV1 | TEXT, z, n, false);
    closed_with(c, 1007);
    /* A bomb: 32 MiB of zeros in about 32 KB, past max_message (1 MiB). */
    size_t big = 32u << 20;
    char *zeros = calloc(1, big);
    n = zc(zeros, big, z, sizeof z);
    free(zeros);
    ck_assert_uint_lt(n, 40000);
    put_frame(c = deflating(), FIN | RSV1 | BINARY, z, n, false);
    closed_with(c, 1009);
}
END_TEST

START_TEST(ws_deflate_python_client)
{
    python_client("client-deflate", "/ws-z");
    for (int i = 0; i < 3; i++)
        expect_report(-ENOTCONN, 4001);
}
END_TEST

/* ---- our client ------------------------------------------------------------- */

static char url_text[256];

static const char *ws_url(int port, const char *path)
{
    snprintf(url_text, sizeof url_text, "ws://127.0.0.1:%d%s", port, path);
    return url_text;
}

static void round_trip(sp_ws_t *ws, sp_ws_type_t type, const void *p, size_t n)
{
    ck_assert_int_eq(sp_ws_send(ws, type, p, n), 0);
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), 0);
    ck_assert_int_eq(m.type, type);
    ck_assert_uint_eq(m.len, n);
    ck_assert(!memcmp(m.data, p, n));
}

/* 1 byte, 100 KB of text and of binary, 900 KB of binary, twice (the
 * second time over the windows the first left). */
static void messages(sp_ws_t *ws)
{
    size_t n = 900 * 1024;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)(i % 7 ? 'a' + i % 26 : i * 13);
    char *text = malloc(100000);
    for (size_t i = 0; i < 100000; i++)
        text[i] = "spindle fibers "[i % 15];
    for (int round = 0; round < 2; round++) {
        round_trip(ws, SP_WS_TEXT, "x", 1);
        round_trip(ws, SP_WS_TEXT, text, 100000);
        round_trip(ws, SP_WS_BINARY, big, 100000);
        round_trip(ws, SP_WS_BINARY, big, n);
    }
    free(big);
    free(text);
}

/* What the Python server agreed, as it says on "ext?". */
static void agreed(sp_ws_t *ws, const char *want)
{
    ck_assert_int_eq(sp_ws_send(ws, SP_WS_TEXT, "ext?", 4), 0);
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), 0);
    char got[512];
    snprintf(got, sizeof got, "%.*s", (int)m.len, (const char *)m.data);
    ck_assert_msg(strstr(got, want), "agreed %s, not %s", got, want);
}

static const struct {
    const char *variant, *agreed;
    int bits;
} python_servers[] = {
    {"default", "local_max_window_bits=12", 15},
    {"default", "remote_max_window_bits=10, local_max_window_bits=10", 10},
    {"nct", "remote_no_context_takeover=True, local_no_context_takeover=True", 15},
    {"bits", "remote_max_window_bits=9, local_max_window_bits=10", 12},
};

static size_t variant; /* of python_servers, for the fiber */

static void against_python(void *arg)
{
    (void)arg;
    size_t i = variant;
    sp_ws_opts_t o = {.deflate = true, .deflate_window_bits = python_servers[i].bits};
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(ws_url(peer_port, "/"), &o, &ws), 0);
    agreed(ws, python_servers[i].agreed);
    messages(ws);
    ck_assert_int_eq(sp_ws_close(ws, 1000, NULL), 0);
    sp_ws_free(ws);
}

START_TEST(ws_deflate_client_against_python_server)
{
    for (size_t i = 0; i < sizeof python_servers / sizeof python_servers[0]; i++) {
        fprintf(stderr, "python server: %s, our window %d\n", python_servers[i].variant,
                python_servers[i].bits);
        python_peer_start((const char *[]){"server-deflate", python_servers[i].variant, NULL});
        variant = i;
        run_fibers(against_python, 1);
        python_peer_stop();
    }
}
END_TEST

/* Answers the client did not offer or cannot honour fail the connect. */
START_TEST(ws_deflate_client_checks_the_answer)
{
    static const struct {
        const char *answer;
        bool deflate;
        int bits, rc;
    } cases[] = {
        {"permessage-deflate", false, 0, -EPROTO}, /* not offered */
        {"x-foo", true, 0, -EPROTO},
        {"permessage-deflate; client_max_window_bits=8", true, 15, -EPROTO},
        {"permessage-deflate", true, 12, -EPROTO}, /* our server_max_window_bits ignored */
        {"permessage-deflate; server_max_window_bits=12; client_max_window_bits=12", true, 12, 0},
        {"-", true, 12, 0}, /* declined */
    };
    size_t n = sizeof cases / sizeof cases[0];
    const char *args[16] = {"answer"};
    for (size_t i = 0; i < n; i++)
        args[1 + i] = cases[i].answer;
    python_peer_start(args);
    for (size_t i = 0; i < n; i++) {
        sp_ws_opts_t o = {.deflate = cases[i].deflate, .deflate_window_bits = cases[i].bits};
        sp_ws_t *ws = NULL;
        ck_assert_msg(sp_ws_connect(ws_url(peer_port, "/"), &o, &ws) == cases[i].rc,
                      "answer %s", cases[i].answer);
        sp_ws_free(ws);
    }
    python_peer_stop();
}
END_TEST

static void against_spindle(void *arg)
{
    (void)arg;
    int port = sp_addr_port(&S.addr);
    sp_ws_opts_t o = {.deflate = true, .deflate_window_bits = 9};
    sp_ws_t *ws;
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/ws-z"), &o, &ws), 0);
    messages(ws);
    ck_assert_int_eq(sp_ws_close(ws, 4100, NULL), 0);
    sp_ws_free(ws);
    /* The server's compressed echo inflates past our limit: 1009. */
    o.max_message = 1000;
    ck_assert_int_eq(sp_ws_connect(ws_url(port, "/ws-z"), &o, &ws), 0);
    static char zeros[100000];
    ck_assert_int_eq(sp_ws_send(ws, SP_WS_BINARY, zeros, sizeof zeros), 0);
    sp_ws_msg_t m;
    ck_assert_int_eq(sp_ws_recv(ws, &m, 10000000), -EMSGSIZE);
    sp_ws_free(ws);
}

START_TEST(ws_deflate_client_against_spindle_server)
{
    run_fibers(against_spindle, 1);
    expect_report(-ENOTCONN, 4100);
    expect_report(-ENOTCONN, 1009);
}
END_TEST

int main(void)
{
    Suite *s = http_suite("ws_deflate");
    ADD_CASE(s, "server", ws_setup, server_stop, ws_deflate_answers_offers, ws_deflate_echo_raw,
             ws_deflate_violations_get_their_close_code, ws_deflate_python_client,
             ws_deflate_client_against_spindle_server);
    ADD_CASE(s, "python", NULL, NULL, ws_deflate_client_against_python_server,
             ws_deflate_client_checks_the_answer);
    return sp_test_run(s);
}
