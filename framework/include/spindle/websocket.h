/* spindle WebSocket (RFC 6455) on the HTTP server and as a client.
 *
 * Server: a route whose handler calls sp_ws_serve (or one added with
 * sp_http_router_add_ws) checks the upgrade request, answers 101 and runs
 * fn(ws, arg) in the connection's fiber, which then owns the connection:
 * plain sequential code around sp_ws_recv and sp_ws_send. When fn returns
 * the close handshake is finished (1000 if fn did not close) and the
 * connection is closed. Bad handshakes are answered by the server: 400
 * (missing or malformed Connection or Sec-WebSocket-Key, not HTTP/1.1, a
 * request body), 426 with "Upgrade: websocket" (no Upgrade: websocket) or
 * with "Sec-WebSocket-Version: 13" (another version), 405 (not GET).
 *
 * Client: sp_ws_connect("ws://host:port/path", opts, &ws), or wss:// over
 * TLS (opts.tls). In an IOManager fiber every wait parks the fiber; on a
 * plain thread it blocks the thread (poll).
 *
 * sp_ws_recv returns whole messages (continuation frames joined) and
 * handles control frames itself: a ping is answered with a pong, a pong
 * is counted, a close is answered and ends the connection. A peer that
 * breaks the protocol is sent a close frame with the RFC's code and the
 * connection ends:
 *   1002 unmasked frame from a client (masked one from a server), RSV bits
 *        set, unknown opcode, a control frame over 125 bytes or
 *        fragmented, a continuation without a message or a new message
 *        inside one, a bad close code or a 1-byte close payload;
 *   1007 a text message or a close reason that is not UTF-8 (checked
 *        as the bytes come, across fragments);
 *   1009 a message over max_message;
 *   1001 not a byte from the peer for idle_timeout_us (a ping counts).
 * With permessage-deflate negotiated, RSV1 marks a compressed message's
 * first frame (1002 on a control or continuation frame, or without the
 * extension); undecodable deflate data is 1002, an inflated message over
 * max_message 1009 (found as it inflates), inflated text not UTF-8 1007.
 *
 * permessage-deflate (opts.deflate) is off by default on both sides: it
 * costs memory per connection (zlib's streams: about 43 KiB more per idle
 * connection with the default window, docs/http.md) and CPU per message,
 * and compressing secrets in the same message as data a third party
 * chooses leaks them through the sizes (as CRIME and BREACH did over
 * TLS). The server then honours an offer's server_no_context_takeover,
 * client_no_context_takeover, server_max_window_bits (9-15; an offer of 8
 * is declined: zlib cannot compress with a 256-byte window) and
 * client_max_window_bits, and limits both windows to deflate_window_bits
 * where it may; malformed offers are declined, not failed. The client
 * offers client_max_window_bits (and server_max_window_bits under 15) and
 * fails sp_ws_connect with -EPROTO on an answer it did not offer or cannot
 * honour (also any extension when it offered none). Messages under 64
 * bytes go out uncompressed. No subprotocols.
 *
 * One fiber at a time may use a ws (recv answers pings with sends of its
 * own, so sends from a second fiber could interleave with them).
 * Errors: 0 or a negative errno.
 */
#ifndef SPINDLE_WEBSOCKET_H
#define SPINDLE_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle/http.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_ws sp_ws_t;

typedef enum sp_ws_type {
    SP_WS_TEXT = 1,  /* UTF-8, checked on both sides */
    SP_WS_BINARY = 2
} sp_ws_type_t;

/* Close codes (RFC 6455 7.4.1) sent and received. */
enum {
    SP_WS_NORMAL = 1000,
    SP_WS_GOING_AWAY = 1001,
    SP_WS_PROTOCOL_ERROR = 1002,
    SP_WS_UNSUPPORTED = 1003,
    SP_WS_NO_STATUS = 1005, /* received a close without a code */
    SP_WS_ABNORMAL = 1006,  /* the connection ended without a close */
    SP_WS_INVALID_DATA = 1007,
    SP_WS_POLICY = 1008,
    SP_WS_TOO_BIG = 1009,
    SP_WS_INTERNAL_ERROR = 1011
};

/* Zero-initialise; 0 means the default given, a negative timeout none. */
typedef struct sp_ws_opts {
    size_t max_message;          /* a whole message; 1 MiB; over: 1009 */
    int64_t idle_timeout_us;     /* nothing from the peer; 60 s; close 1001 */
    int64_t send_timeout_us;     /* each wait for the peer to take bytes; 30 s */
    int64_t close_timeout_us;    /* wait for the peer's close answer; 2 s */
    int64_t connect_timeout_us;  /* client: the connect, the TLS handshake
                                    and the upgrade; 10 s */
    const char *const *headers;  /* client: extra "Name: value" lines,
                                    NULL-terminated, or NULL */
    /* client, wss://: a client config (the caller keeps it until
     * sp_ws_free). NULL: the process's default config (the system CA
     * store), as the HTTP client's. */
    sp_tls_config_t *tls;
    bool deflate;                /* permessage-deflate (RFC 7692): the server
                                    accepts an offer, the client makes one;
                                    off (see below) */
    int deflate_window_bits;     /* our compressor's window, 2^bits bytes (9-15,
                                    clamped), and the peer's where the
                                    handshake lets us ask; 12 (4 KiB) */
} sp_ws_opts_t;

#define SP_WS_DEFAULT_MAX_MESSAGE (1024u * 1024u)
#define SP_WS_DEFAULT_IDLE_TIMEOUT_US 60000000LL
#define SP_WS_DEFAULT_SEND_TIMEOUT_US 30000000LL
#define SP_WS_DEFAULT_CLOSE_TIMEOUT_US 2000000LL
#define SP_WS_DEFAULT_CONNECT_TIMEOUT_US 10000000LL
#define SP_WS_DEFAULT_DEFLATE_WINDOW_BITS 12

/* A received message: data is owned by the ws, valid until the next call
 * on it, never NULL (text is not NUL-terminated). */
typedef struct sp_ws_msg {
    sp_ws_type_t type;
    const void *data;
    size_t len;
} sp_ws_msg_t;

/* ---- server ------------------------------------------------------------- */

typedef void (*sp_ws_fn)(sp_ws_t *ws, void *arg);

/* In a handler: answer the upgrade request with 101 and run fn(ws, arg)
 * (the connection closes afterwards; the response can no longer be used,
 * its calls give -EALREADY), or answer a bad handshake (see the top).
 * opts may be NULL. The handler returns what this returns (0, or -ENOMEM
 * from answering a bad handshake). */
int sp_ws_serve(sp_http_request_t *req, sp_http_response_t *res,
                const sp_ws_opts_t *opts, sp_ws_fn fn, void *arg);
/* A GET route of kind SP_HTTP_EXACT whose requests go to sp_ws_serve
 * with a copy of opts (NULL: defaults). As sp_http_router_add. */
int sp_http_router_add_ws(sp_http_router_t *r, const char *pattern,
                          const sp_ws_opts_t *opts, sp_ws_fn fn, void *arg);
/* The upgrade request (path, parameters, headers) during fn; NULL for a
 * client's ws. */
sp_http_request_t *sp_ws_request(sp_ws_t *ws);

/* ---- client ------------------------------------------------------------- */

/* Connect to "ws://host[:port]/path?query" (port 80) or "wss://..." (TLS,
 * port 443: the certificate verified and naming the host, as the HTTP
 * client's) and do the handshake (a random key, its Sec-WebSocket-Accept
 * checked). opts may be NULL.
 * 0 and *out (sp_ws_free it), or -errno: -EINVAL (bad URL or header),
 * -EPROTONOSUPPORT (neither ws:// nor wss://), -ENOENT, -ECONNREFUSED,
 * -ETIMEDOUT, -EPROTO (not a valid 101 answer), -ECONNRESET,
 * SP_TLS_EVERIFY, SP_TLS_EHANDSHAKE. */
int sp_ws_connect(const char *url, const sp_ws_opts_t *opts, sp_ws_t **out);
/* Close the socket and free a client's ws (after sp_ws_close, or as an
 * abrupt end; over TLS a close_notify goes first, without waiting). NULL
 * is a no-op. */
void sp_ws_free(sp_ws_t *ws);

/* ---- both --------------------------------------------------------------- */

/* The next whole message, waiting up to timeout_us (< 0: as long as the
 * idle timeout allows). 0 and *msg, or -errno:
 *   -EAGAIN     timeout_us passed; the connection is fine (a message
 *               half received stays buffered);
 *   -ENOTCONN   the connection is closed: the close handshake is done
 *               (sp_ws_close_code says the peer's code) or was already;
 *   -EPROTO, -EILSEQ, -EMSGSIZE  the peer broke the protocol, sent bad
 *               UTF-8, or a message too big: closed with 1002, 1007, 1009;
 *   -ETIMEDOUT  the idle timeout passed: closed with 1001;
 *   -ESHUTDOWN  the server is stopping (sp_http_server_stop): closed with
 *               1001 at once, not at the end of the stop's drain;
 *   -ECONNRESET the peer went away without a close (or mid-frame). */
int sp_ws_recv(sp_ws_t *ws, sp_ws_msg_t *msg, int64_t timeout_us);
/* One message in one frame (compressed with permessage-deflate when it
 * was agreed and len >= 64). Text must be UTF-8 (-EILSEQ). 0 or -errno:
 * -EINVAL (bad type), -ENOTCONN (closed), -EPIPE/-ECONNRESET/-ETIMEDOUT,
 * -ENOMEM (compressing; the connection is then over). */
int sp_ws_send(sp_ws_t *ws, sp_ws_type_t type, const void *data, size_t len);
/* A ping with up to 125 bytes (-EINVAL past that); its pong is counted by
 * sp_ws_recv (sp_ws_pongs). */
int sp_ws_ping(sp_ws_t *ws, const void *data, size_t len);
uint64_t sp_ws_pongs(const sp_ws_t *ws);
/* Start (or finish) the close handshake: send a close frame with code
 * (1000-4999 but 1004-1006 and 1015; 0: no code) and a UTF-8 reason of up
 * to 123 bytes, then read and drop messages until the peer's close comes,
 * up to close_timeout_us. 0 (answered), -ETIMEDOUT (not answered in time;
 * closed anyway), -EINVAL, -ENOTCONN (already closed). */
int sp_ws_close(sp_ws_t *ws, int code, const char *reason);
/* The code the peer closed with (SP_WS_NO_STATUS for none) and its
 * reason, NUL-terminated; 0 while no close came from the peer. */
int sp_ws_close_code(const sp_ws_t *ws, const char **reason);

#ifdef __cplusplus
}
#endif
#endif
