/* Internals of WebSocket: the handshake's digest (ws_sha1.c), the frame
 * receiver and writer (ws_frame.c, pure: no I/O, so the fuzz target drives
 * it alone), and the connection (ws_conn.c) the server and the client
 * (ws_server.c, ws_client.c) build. */
#ifndef SP_WS_INTERNAL_H
#define SP_WS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_internal.h"
#include "spindle/websocket.h"

/* ---- ws_sha1.c ---------------------------------------------------------- */

void sp__sha1(const void *data, size_t len, uint8_t out[20]);
/* Standard base64 with padding; out holds 4 * ((n + 2) / 3) + 1 bytes.
 * Returns the length written (NUL-terminated). */
size_t sp__base64(const uint8_t *p, size_t n, char *out);
/* Bytes decoded from canonical padded base64 into out (cap bytes at
 * most), or -1 if s is not that. */
int sp__base64_decode(const char *s, uint8_t *out, size_t cap);
/* Sec-WebSocket-Accept for a key: base64(SHA-1(key + the RFC's GUID)). */
void sp__ws_accept(const char *key, char out[29]);

/* ---- ws_pmd.c: permessage-deflate negotiation (RFC 7692 7.1) ----------- */

/* What was agreed: each side's compressor window (bits, 8-15) and
 * whether it starts every message afresh. */
typedef struct sp__ws_pmd {
    bool server_no_takeover, client_no_takeover;
    uint8_t server_bits, client_bits;
} sp__ws_pmd_t;

enum { SP__WS_PMD_TEXT = 160 }; /* an offer or answer, NUL-terminated */

/* Server: the first offer of a Sec-WebSocket-Extensions value it can
 * honour, with its own window limit `bits` (9-15): true, *p and the
 * answer's value in out; false declines (none, or malformed). */
bool sp__ws_pmd_accept(const char *offers, int bits, sp__ws_pmd_t *p,
                       char out[SP__WS_PMD_TEXT]);
/* Client: the offer for window limit `bits` (9-15). */
void sp__ws_pmd_offer(int bits, char out[SP__WS_PMD_TEXT]);
/* Client: the server's answer (NULL: none) to that offer: 1 and *p,
 * 0 (declined), or -EPROTO (not what was offered, or cannot be honoured). */
int sp__ws_pmd_check(const char *answer, int bits, sp__ws_pmd_t *p);
/* The options' window bits made 9-15 (0: the default). */
void sp__ws_deflate_opts(sp_ws_opts_t *o);

/* ---- ws_deflate.c: permessage-deflate's zlib streams --------------------- */

typedef struct sp__ws_z sp__ws_z_t;

enum { SP__WS_RSV1 = 0x40 };
/* Messages shorter than this go out uncompressed (RSV1 clear). */
enum { SP__WS_Z_MIN = 64 };

/* Both streams for what was agreed, seen from the client or the server;
 * NULL when out of memory. */
sp__ws_z_t *sp__ws_z_new(const sp__ws_pmd_t *p, bool client);
void sp__ws_z_free(sp__ws_z_t *z);
/* Inflate a piece of a compressed message's payload onto out, which may
 * not pass max bytes: 0, or -code: 1009 (over max), 1002 (not deflate
 * data), 1011 (no memory). */
int sp__ws_z_inflate(sp__ws_z_t *z, const uint8_t *p, size_t n, sp_buf_t *out, size_t max);
/* The message's end: its tail (00 00 ff ff) inflated, the window dropped
 * when the peer does not take it over. As sp__ws_z_inflate. */
int sp__ws_z_inflate_end(sp__ws_z_t *z, sp_buf_t *out, size_t max);
/* Compress a whole message onto out (empty): the payload's length (out's
 * first bytes, the tail left off), or -ENOMEM/-EIO. */
long sp__ws_z_deflate(sp__ws_z_t *z, const void *p, size_t n, sp_buf_t *out);
/* Whether a message of len bytes is sent compressed (z: NULL if not
 * negotiated). */
bool sp__ws_z_wanted(const sp__ws_z_t *z, size_t len);

/* Client, ws_pmd.c: the offer's header line onto b when opts ask for
 * permessage-deflate (0 or -ENOMEM), and the server's answer (NULL:
 * none) to it: 0 and *z (NULL: declined), -EPROTO, -ENOMEM. */
int sp__ws_pmd_request(sp_buf_t *b, const sp_ws_opts_t *o);
int sp__ws_pmd_answer(const char *answer, const sp_ws_opts_t *o, sp__ws_z_t **z);

/* ---- ws_frame.c: receiving ---------------------------------------------- */

/* A UTF-8 check fed in pieces: how many continuation bytes are due and
 * the range the next one must fall in (overlongs, surrogates and code
 * points past U+10FFFF are refused at their second byte). */
typedef struct sp__utf8 {
    uint8_t need, lo, hi;
} sp__utf8_t;

bool sp__utf8_feed(sp__utf8_t *u, const uint8_t *p, size_t n);

enum { SP__WS_OP_CONT = 0, SP__WS_OP_CLOSE = 8, SP__WS_OP_PING = 9, SP__WS_OP_PONG = 10 };
enum { SP__WS_CTL_MAX = 125 };

/* What a feed found. */
enum { SP__WS_NONE, SP__WS_MESSAGE, SP__WS_PING, SP__WS_PONG, SP__WS_CLOSE };

typedef struct sp__ws_rx {
    bool from_client;   /* frames must be masked (else unmasked) */
    size_t max_message;
    sp_buf_t msg;       /* the message being joined, unmasked */
    int msg_type;       /* 0: none under way, else SP_WS_TEXT/BINARY */
    sp__utf8_t utf8;    /* of a text message so far */
    uint64_t left;      /* payload bytes of the current data frame to come */
    bool fin;           /* the current data frame ends its message */
    uint8_t mask[4];
    size_t mask_at;     /* payload bytes of the frame unmasked so far */
    uint8_t ctl[SP__WS_CTL_MAX]; /* a control frame's payload, unmasked */
    size_t ctl_len;
    sp__ws_z_t *z;      /* permessage-deflate negotiated (not owned); NULL: no */
    bool deflated;      /* the message under way is compressed (RSV1) */
    uint64_t zin;       /* its compressed bytes so far */
} sp__ws_rx_t;

void sp__ws_rx_init(sp__ws_rx_t *rx, bool from_client, size_t max_message);
void sp__ws_rx_free(sp__ws_rx_t *rx);
/* Take bytes of p[0, n): the count taken (0: a frame header or control
 * frame is not whole yet, more bytes are needed), *event what completed
 * (a message: rx->msg, msg_type; a control frame: rx->ctl). A violation:
 * -code, the close code to send (1002, 1007, 1009). After SP__WS_MESSAGE
 * the caller clears rx->msg with sp__ws_rx_next. */
long sp__ws_rx_feed(sp__ws_rx_t *rx, const uint8_t *p, size_t n, int *event);
void sp__ws_rx_next(sp__ws_rx_t *rx);
/* A close frame's payload: 0 with *code (SP_WS_NO_STATUS when empty) and
 * the reason's length, or the close code for a bad one (1002, 1007). */
int sp__ws_close_payload(const uint8_t *p, size_t n, int *code);
/* Whether code may be sent in a close frame. */
bool sp__ws_code_ok(int code);

/* ---- ws_frame.c: sending ------------------------------------------------ */

enum { SP__WS_HEAD_MAX = 14 };
/* A frame header (FIN set) for len payload bytes, masked with mask when
 * given: its length. */
size_t sp__ws_head(uint8_t out[SP__WS_HEAD_MAX], int opcode, uint64_t len,
                   const uint8_t *mask);
/* Empty b; past SP__WS_KEEP bytes of room its memory goes too, so a
 * connection idle after one big message does not keep its size. */
enum { SP__WS_KEEP = 64 * 1024 };
void sp__ws_buf_trim(sp_buf_t *b);
/* XOR p with mask, starting at offset `at` of the payload. */
void sp__ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], size_t at);

/* ---- ws_conn.c ---------------------------------------------------------- */

struct sp_ws {
    int fd;
    bool client;            /* masks its frames; frees its fd */
    bool close_sent, closed;
    int peer_code;          /* 0 until a close came */
    char peer_reason[SP__WS_CTL_MAX];
    sp_ws_opts_t opts;      /* defaults filled in */
    sp__ws_rx_t rx;
    sp_buf_t in;
    bool in_borrowed;       /* `in` is the thread's input scratch */
    bool drained;
    sp__http_deadline_t *deadline; /* the reads' timer; NULL: each wait its own */
    sp__http_out_t out;
    uint64_t pongs;
    uint64_t idle_deadline; /* sp_now_ns clock; 0: none */
    sp_http_request_t *req; /* server: the upgrade request */
    const _Atomic bool *stopping; /* server: its stop began; NULL: client */
    uint8_t keys[256];      /* client: random bytes for masking keys */
    size_t keys_used;
    sp__ws_z_t *z;          /* permessage-deflate; NULL: not negotiated */
};

/* Defaults filled into o from opts (NULL: all defaults). */
void sp__ws_opts(sp_ws_opts_t *o, const sp_ws_opts_t *opts);
/* A ws on fd (open); rest: bytes read after the handshake (taken). */
void sp__ws_init(sp_ws_t *ws, int fd, bool client, const sp_ws_opts_t *opts,
                 sp_buf_t *rest);
/* Free its buffers (not the fd, not ws). */
void sp__ws_release(sp_ws_t *ws);

#endif
