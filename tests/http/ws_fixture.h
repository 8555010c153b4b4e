/* The WebSocket tests' shared parts (tests/http/test_ws_*.c): the echo
 * endpoints on the fixture's server, the report each endpoint's fiber
 * writes when it ends, and the Python peer (ws_peer.py). */
#ifndef SP_WS_FIXTURE_H
#define SP_WS_FIXTURE_H

#include <spindle/websocket.h>

#include "http_fixture.h"

/* The server with /ws (defaults) and /ws-small (max_message 1000, idle
 * timeout 300 ms) echoing every message; "close" makes the endpoint close
 * with 4000 "bye", "who" is answered with its path and parameter x. */
void ws_setup(void);
/* The next endpoint fiber that ended said: its last sp_ws_recv (or
 * sp_ws_close) result and the peer's close code. Waits up to 10 s. */
void expect_report(int rc, int code);
/* Debian's interpreter, which has python3-websockets. */
#define WS_PYTHON "/usr/bin/python3"

#endif
