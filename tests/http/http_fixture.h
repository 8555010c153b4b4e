/* The HTTP tests' shared parts (tests/http/test_http_*.c): a tiny HTTP
 * client on a blocking socket, the in-process server on 127.0.0.1 with its
 * routes and static tree, and the checks several feature files make. Only
 * the public headers: these tests prove framework/include is enough. */
#ifndef SP_HTTP_FIXTURE_H
#define SP_HTTP_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/net.h>

#include "testutil.h"

/* ---- a tiny HTTP client on a blocking socket ---------------------------- */

typedef struct client {
    int fd;
    char buf[1 << 16];
    size_t len;
} client_t;

typedef struct resp {
    int status;
    char head[16384]; /* header lines, NUL-terminated */
    char *body;
    size_t body_len;
} resp_t;

/* Connected, every read bounded by SO_RCVTIMEO (10 s). */
client_t *client_open(const sp_addr_t *a);
void client_close(client_t *c);
void send_str(client_t *c, const char *s);
/* More bytes into the buffer: the count, 0 at EOF, -1 on error/timeout. */
ssize_t fill(client_t *c);
/* The next CRLF-terminated line, without its CRLF: 0, or -1 on EOF/timeout
 * or a line longer than size - 1. */
int take_line(client_t *c, char *line, size_t size);
/* The value of a response header (first match), or NULL. */
const char *hdr(const resp_t *r, const char *name, char *out, size_t size);
/* One response. 0, or -1 on EOF/timeout/garbage. head_only: a HEAD answer. */
int get_response(client_t *c, resp_t *r, bool head_only);
void resp_free(resp_t *r);
/* The body as a string (for short text bodies). */
const char *body_str(resp_t *r);
/* Send a request, read the answer. */
void roundtrip(client_t *c, const char *req, resp_t *r);
/* The server closed the connection: EOF with no further byte. */
void assert_closed(client_t *c);

/* ---- the in-process server ---------------------------------------------- */

typedef struct server {
    sp_iomanager_t *io;
    sp_http_server_t *http;
    sp_http_router_t *router;
    sp_http_static_t *st;
    sp_addr_t addr;
} server_t;

extern server_t S;
/* The static tree's directory (see make_root in http_fixture.c). */
extern char root_dir[64];

/* The static tree under root_dir (see http_fixture.c), made afresh, and
 * removed with the secret next to it. */
void make_root(void);
void remove_root(void);
/* Routes of a test program's own, added by server_start before the
 * fixture's (NULL: none). */
extern void (*server_extra_routes)(sp_http_router_t *r);
/* A server on 127.0.0.1:0 with the test routes and /static (o: NULL for
 * the defaults); S holds it. */
void server_start(const sp_http_server_opts_t *o);
/* After the HTTP server stopped. */
void server_free(void);
void server_stop(void);
void setup_default(void);
/* One request on a new connection; returns the response (caller frees). */
resp_t once(const char *req);
int status_of(const char *req);
#define GET(path) "GET " path " HTTP/1.1\r\nHost: t\r\n\r\n"
/* One request on a new connection; its body must be `want`. */
void check_body(const char *req, const char *want);

/* Says which route answered: arg is its name. */
int h_named(sp_http_request_t *req, sp_http_response_t *res, void *arg);
/* Starts its answer, says so on park_pipes[0], then waits (parked, with its
 * request and its response half made) for a byte on park_pipes[1] before
 * finishing from what the request said. */
extern int park_pipes[2][2];
int h_park(sp_http_request_t *req, sp_http_response_t *res, void *arg);

/* ---- checks ------------------------------------------------------------- */

/* Send bad bytes in writes of `piece` bytes, expect `status` and a closed
 * connection, then check the server still serves a new one. */
void expect_refused_in_pieces(const char *req, size_t len, size_t piece, int status);
void expect_refused(const char *req, size_t len, int status);
void refused(const char *req, int status);
/* n copies of ch, NUL-terminated (caller frees). */
char *repeat(char ch, size_t n);
uint64_t ms_since(uint64_t t0);
/* The client's next answer is 200 with "Connection: close", and then the
 * connection closes. */
void expect_200_then_close(client_t *c);
/* The client's next answer is 408, no sooner than 290 ms after t0. */
void expect_408_closed(client_t *c, uint64_t t0);
/* Run n client fibers fn(i) on their own IOManager until all are done. */
void run_fibers(void (*fn)(void *), int n);

/* ---- registration ------------------------------------------------------- */

/* The test program's suite, SIGPIPE ignored (peers close on the tests). */
Suite *http_suite(const char *name);

/* One test case (60 s per test): its fixtures (setup NULL: none) and tests. */
#define ADD_CASE(s, name, setup, teardown, ...) \
    SP_TEST_CASE(s, name, 60, setup, teardown, __VA_ARGS__)

#endif
