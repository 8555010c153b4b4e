/* WebSocket server against autobahn's asyncio client (ws_autobahn_client.py,
 * Debian python3-autobahn), a second client implementation beside
 * `websockets`: echo of text and binary up to 300 KiB, messages autobahn
 * fragments, pings, permessage-deflate, the size limit, bad UTF-8 and the
 * close handshake both ways. Each check reads what autobahn saw, and what
 * the endpoint saw. Skipped (77) where autobahn is not installed. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ws_fixture.h"

/* The client in MODE against PATH on the fixture's server. */
static void autobahn(const char *mode, const char *path)
{
    char url[128];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d%s", sp_addr_port(&S.addr), path);
    python_run("ws_autobahn_client.py", (const char *[]){mode, url, NULL});
}

/* Its next line is `want` (each of its waits is bounded, and so is the
 * whole script). */
static void line(const char *want)
{
    char got[512];
    ck_assert_msg(fgets(got, sizeof got, peer_out), "no line; wanted \"%s\"", want);
    got[strcspn(got, "\n")] = '\0';
    ck_assert_str_eq(got, want);
}

/* It said nothing more and exited 0. */
static void done(void)
{
    char more[512];
    ck_assert_msg(!fgets(more, sizeof more, peer_out), "unexpected line: %s", more);
    int status = python_peer_stop();
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
}

/* autobahn closed with 1000 "done"; our answer carries the code. */
static void closed_done(void)
{
    line("close True 1000 None");
    expect_report_reason(-ENOTCONN, 1000, "done");
}

START_TEST(ws_autobahn_echo)
{
    autobahn("echo", "/ws");
    static const char *const sizes[] = {"1", "65536", "307200"};
    char want[64];
    for (size_t i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "text %s ok", sizes[i]);
        line(want);
        snprintf(want, sizeof want, "binary %s ok", sizes[i]);
        line(want);
    }
    closed_done();
    done();
}
END_TEST

START_TEST(ws_autobahn_fragments)
{
    autobahn("fragments", "/ws");
    line("text 10000 in 10 frames ok");
    /* A length that is a multiple of the size ends with an empty frame. */
    line("binary 307200 in 76 frames ok");
    line("text 40 in 41 frames ok");
    closed_done();
    done();
}
END_TEST

START_TEST(ws_autobahn_ping)
{
    autobahn("ping", "/ws");
    line("pong 13 ok");
    line("pong 0 ok");
    line("pong 125 ok");
    closed_done();
    line("auto pings answered");
    closed_done();
    done();
}
END_TEST

START_TEST(ws_autobahn_deflate)
{
    autobahn("deflate", "/ws-z");
    line("default agreed: permessage-deflate; client_no_context_takeover; "
         "server_max_window_bits=12; client_max_window_bits=12");
    line("default echo ok, compressed");
    closed_done();
    line("no-context agreed: permessage-deflate; server_no_context_takeover; "
         "client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12");
    line("no-context echo ok, compressed");
    closed_done();
    done();
}
END_TEST

/* /ws-limit takes messages up to 1000 bytes. */
START_TEST(ws_autobahn_too_big)
{
    autobahn("too-big", "/ws-limit");
    line("1000 ok");
    line("close True 1009 None");
    expect_report(-EMSGSIZE, 0);
    line("close True 1009 None");
    expect_report(-EMSGSIZE, 0);
    done();
}
END_TEST

START_TEST(ws_autobahn_bad_utf8)
{
    autobahn("bad-utf8", "/ws");
    line("close True 1007 None");
    expect_report(-EILSEQ, 0);
    done();
}
END_TEST

START_TEST(ws_autobahn_close)
{
    autobahn("close", "/ws");
    line("close True 1000 None");
    expect_report_reason(-ENOTCONN, 1000, "fin \xce\xba");
    /* autobahn answers a close with 1000 and no reason. */
    line("close True 4000 bye");
    expect_report_reason(0, 1000, "");
    done();
}
END_TEST

int main(void)
{
    if (system(WS_PYTHON " -c 'import autobahn.asyncio.websocket' 2>/dev/null") != 0) {
        fprintf(stderr, "test_ws_autobahn: no autobahn for " WS_PYTHON ", skipped\n");
        return 77;
    }
    Suite *s = http_suite("ws_autobahn");
    ADD_CASE(s, "autobahn", ws_setup, server_stop, ws_autobahn_echo, ws_autobahn_fragments,
             ws_autobahn_ping, ws_autobahn_deflate, ws_autobahn_too_big, ws_autobahn_bad_utf8,
             ws_autobahn_close);
    return sp_test_run(s);
}
