/* The WebSocket tests' shared parts (tests/http/test_ws_*.c): the echo
 * endpoints on the fixture's server, the report each endpoint's fiber
 * writes when it ends, and the Python peer (ws_peer.py). */
#ifndef SP_WS_FIXTURE_H
#define SP_WS_FIXTURE_H

#include <stdio.h>

#include <spindle/websocket.h>

#include "http_fixture.h"

/* The server with /ws (defaults), /ws-small (max_message 1000, idle
 * timeout 300 ms), /ws-limit (max_message 1000) and /ws-z, /ws-z15
 * (permessage-deflate) echoing every message; "close" makes the endpoint close
 * with 4000 "bye", "who" is answered with its path and parameter x. */
void ws_setup(void);
/* The next endpoint fiber that ended said: its last sp_ws_recv (or
 * sp_ws_close) result and the peer's close code. Waits up to 10 s. */
void expect_report(int rc, int code);
/* The same, and the peer's close reason was `reason`. */
void expect_report_reason(int rc, int code, const char *reason);
/* Debian's interpreter, which has python3-websockets and python3-autobahn. */
#define WS_PYTHON "/usr/bin/python3"

/* ---- the Python peers ---------------------------------------------------- */

/* WS_PYTHON running tests/http/SCRIPT with args (NULL-terminated); its
 * output in peer_out. */
void python_run(const char *script, const char *const *args);
/* ws_peer.py with args (NULL-terminated: a mode and its arguments), its
 * port read from its first line into peer_port; its output in peer_out. */
void python_peer_start(const char *const *args);
/* Close its stdin (a server's cue to end) and reap it: its wait status. */
int python_peer_stop(void);
/* ws_peer.py MODE ws://<the fixture's server>PATH, which must exit 0. */
void python_client(const char *mode, const char *path);
extern int peer_port;
extern FILE *peer_out;

/* ---- raw frames over a client_t (http_fixture.h) -------------------------- */

enum { FIN = 0x80, RSV1 = 0x40, TEXT = 1, BINARY = 2, CLOSE = 8, PING = 9, PONG = 10 };

#define UPGRADE(path, extra)                                                              \
    "GET " path " HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
    extra "\r\n"
#define KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define V13 "Sec-WebSocket-Version: 13\r\n"

/* A raw connection after a checked handshake (RFC 6455's sample key). */
client_t *ws_open(const char *path);
/* The same with extra header lines (each ending in CRLF); the answer's
 * Sec-WebSocket-Extensions value into ext ("" if none). */
client_t *ws_open_ext(const char *path, const char *extra, char *ext, size_t cap);
/* One frame with first byte b0, masked unless `plain`. */
void put_frame(client_t *c, int b0, const void *p, size_t n, bool plain);
/* The server's next frame (unmasked, under 64 KiB): its first byte. */
int get_frame(client_t *c, char *out, size_t *len);
void expect_frame(client_t *c, int b0, const void *p, size_t n);
/* A close frame with `code` (no reason), then the end of the connection. */
void expect_close(client_t *c, int code);

#endif
