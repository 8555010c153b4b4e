/* A WebSocket connection, server's or client's: messages in and out over
 * the HTTP layer's I/O (sp__http_read_by, sp__http_out_flush; over TLS
 * when out.tls is set, for wss:// on both sides), which parks the fiber on
 * every wait and bounds it with a deadline.
 *
 * sp_ws_recv feeds what is buffered to the frame receiver (ws_frame.c)
 * and reads more only when it needs more. Control frames are handled
 * there, in the receiving fiber: a ping is answered before the next frame
 * is looked at, so a ping flood costs one pong each and no memory. A peer
 * that breaks the rules is sent its close code and then only drained (up
 * to close_timeout_us and 1 MiB) before the connection ends: closing with
 * unread bytes would make the kernel send a reset, which can destroy the
 * close frame before the peer reads it.
 *
 * Like the HTTP connections (http_scratch.c), a server's WebSocket reads
 * into the thread's input scratch and lays small frames out in its output
 * scratch, holding neither while it waits: with many connections each
 * one's own buffers would have left the caches by its next message. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "spindle/timer.h"
#include "ws_internal.h"

enum { READ_SIZE = 16384, DRAIN_BYTES = 1 << 20 };
/* Server frames up to this size are copied to go out in one piece. */
enum { SMALL_FRAME = 4096 };

static int64_t pick(int64_t v, int64_t def)
{
    return v ? v : def;
}

void sp__ws_opts(sp_ws_opts_t *o, const sp_ws_opts_t *opts)
{
    *o = opts ? *opts : (sp_ws_opts_t){0};
    o->max_message = o->max_message ? o->max_message : SP_WS_DEFAULT_MAX_MESSAGE;
    o->idle_timeout_us = pick(o->idle_timeout_us, SP_WS_DEFAULT_IDLE_TIMEOUT_US);
    o->send_timeout_us = pick(o->send_timeout_us, SP_WS_DEFAULT_SEND_TIMEOUT_US);
    o->close_timeout_us = pick(o->close_timeout_us, SP_WS_DEFAULT_CLOSE_TIMEOUT_US);
    o->connect_timeout_us = pick(o->connect_timeout_us, SP_WS_DEFAULT_CONNECT_TIMEOUT_US);
    sp__ws_deflate_opts(o);
}

static void touch(sp_ws_t *ws)
{
    ws->idle_deadline = sp__http_deadline(ws->opts.idle_timeout_us);
}

void sp__ws_init(sp_ws_t *ws, int fd, bool client, const sp_ws_opts_t *opts,
                 sp_buf_t *rest)
{
    memset(ws, 0, sizeof *ws);
    ws->fd = fd;
    ws->client = client;
    sp__ws_opts(&ws->opts, opts);
    sp__ws_rx_init(&ws->rx, !client, ws->opts.max_message);
    ws->in = *rest; /* taken: the bytes after the handshake are frames */
    sp_buf_init(rest);
    ws->out = (sp__http_out_t){.fd = fd, .buf = SP_BUF_INIT,
                               .timeout_us = ws->opts.send_timeout_us};
    ws->keys_used = sizeof ws->keys;
    /* One timer for all the reads' deadlines, not one per wait. */
    ws->deadline = sp__http_deadline_new(fd);
    touch(ws);
}

void sp__ws_release(sp_ws_t *ws)
{
    sp__http_deadline_free(ws->deadline);
    sp__ws_rx_free(&ws->rx);
    sp__ws_z_free(ws->z);
    sp_buf_clear(&ws->in);
    sp__http_scratch_return(&ws->in, &ws->in_borrowed, SP__SCRATCH_IN);
    sp_buf_free(&ws->in);
    sp_buf_free(&ws->out.buf);
}

/* A client's masking key: kernel randomness, fetched for 64 keys at once. */
static int next_key(sp_ws_t *ws, uint8_t key[4])
{
    if (ws->keys_used + 4 > sizeof ws->keys) {
        size_t got = 0;
        while (got < sizeof ws->keys) {
            ssize_t n = getrandom(ws->keys + got, sizeof ws->keys - got, 0);
            if (n < 0 && errno != EINTR)
                return -errno;
            got += n > 0 ? (size_t)n : 0;
        }
        ws->keys_used = 0;
    }
    memcpy(key, ws->keys + ws->keys_used, 4);
    ws->keys_used += 4;
    return 0;
}

/* One frame. A server's payload goes out from where it is; a client's is
 * copied to be masked. A failed send leaves a frame cut short: the
 * connection is over. */
static int send_frame(sp_ws_t *ws, int op, const void *data, size_t len)
{
    uint8_t head[SP__WS_HEAD_MAX];
    int rc;
    if (!ws->client && len > SMALL_FRAME) {
        struct iovec v[2] = {{head, sp__ws_head(head, op, len, NULL)}, {(void *)data, len}};
        rc = sp__http_out_flush(&ws->out, v, 2);
    } else if (!ws->client) {
        /* Copied next to its header, in the thread's output scratch (as
         * the HTTP connections' answers: it stays in the caches): one
         * send() costs less than a sendmsg of two pieces. */
        size_t h = sp__ws_head(head, op, len, NULL);
        sp__http_scratch_borrow(&ws->out.buf, &ws->out.borrowed, SP__SCRATCH_OUT);
        rc = sp__buf_append(&ws->out.buf, head, h) < 0 ||
                     (len && sp__buf_append(&ws->out.buf, data, len) < 0)
                 ? -ENOMEM
                 : sp__http_out_flush(&ws->out, NULL, 0);
        sp_buf_clear(&ws->out.buf);
        sp__http_scratch_return(&ws->out.buf, &ws->out.borrowed, SP__SCRATCH_OUT);
    } else {
        uint8_t key[4];
        if ((rc = next_key(ws, key)) < 0)
            return rc;
        size_t h = sp__ws_head(head, op, len, key);
        if (sp__buf_append(&ws->out.buf, head, h) < 0 ||
            (len && sp__buf_append(&ws->out.buf, data, len) < 0)) {
            sp_buf_clear(&ws->out.buf);
            return -ENOMEM;
        }
        sp__ws_mask((uint8_t *)sp__buf_data(&ws->out.buf) + h, len, key, 0);
        rc = sp__http_out_flush(&ws->out, NULL, 0);
        sp__ws_buf_trim(&ws->out.buf);
    }
    if (rc < 0)
        ws->closed = true;
    return rc;
}

static int send_close(sp_ws_t *ws, int code, const char *reason, size_t len)
{
    uint8_t p[SP__WS_CTL_MAX];
    size_t n = 0;
    if (code) {
        p[0] = (uint8_t)(code >> 8), p[1] = (uint8_t)code;
        if (len)
            memcpy(p + 2, reason, len);
        n = 2 + len;
    }
    ws->close_sent = true;
    return send_frame(ws, SP__WS_OP_CLOSE, p, n);
}

/* Read and drop what the peer still sends, for a bounded time. */
static void drain(sp_ws_t *ws)
{
    shutdown(ws->fd, SHUT_WR);
    uint64_t until = sp__http_deadline(ws->opts.close_timeout_us);
    for (size_t dropped = 0; dropped < DRAIN_BYTES;) {
        sp_buf_clear(&ws->in);
        ssize_t n = sp__http_read_by(ws->deadline, ws->fd, ws->out.tls, &ws->in, &ws->in_borrowed,
                                     READ_SIZE, until, &ws->drained);
        if (n <= 0)
            break;
        dropped += (size_t)n;
    }
    sp_buf_clear(&ws->in);
    sp__http_scratch_return(&ws->in, &ws->in_borrowed, SP__SCRATCH_IN);
}

/* End the connection with a close code of our own (a broken rule, the
 * idle timeout): the errno sp_ws_recv returns for it. */
static int fail(sp_ws_t *ws, int code)
{
    if (!ws->close_sent && !ws->closed)
        send_close(ws, code, "", 0);
    if (!ws->closed)
        drain(ws);
    ws->closed = true;
    switch (code) {
    case SP_WS_GOING_AWAY: return -ETIMEDOUT;
    case SP_WS_INVALID_DATA: return -EILSEQ;
    case SP_WS_TOO_BIG: return -EMSGSIZE;
    case SP_WS_INTERNAL_ERROR: return -ENOMEM;
    default: return -EPROTO;
    }
}

/* The server's stop began: the peer hears 1001 before the connection
 * ends, rather than waiting for the stop's drain to cut it. */
static bool stopping(const sp_ws_t *ws)
{
    return ws->stopping && atomic_load(ws->stopping);
}

static int going_away(sp_ws_t *ws)
{
    fail(ws, SP_WS_GOING_AWAY);
    return -ESHUTDOWN;
}

/* The peer's close: checked, noted, answered with its code unless we
 * closed first. */
static int on_close(sp_ws_t *ws)
{
    int code, bad = sp__ws_close_payload(ws->rx.ctl, ws->rx.ctl_len, &code);
    if (bad)
        return fail(ws, bad);
    ws->peer_code = code;
    size_t rlen = ws->rx.ctl_len > 2 ? ws->rx.ctl_len - 2 : 0;
    memcpy(ws->peer_reason, ws->rx.ctl + 2, rlen);
    ws->peer_reason[rlen] = '\0';
    if (!ws->close_sent)
        send_close(ws, code == SP_WS_NO_STATUS ? 0 : code, "", 0);
    ws->closed = true;
    return -ENOTCONN;
}

/* 1: go on; 0: a message is in *msg; < 0: the connection ended. */
static int on_event(sp_ws_t *ws, int event, sp_ws_msg_t *msg)
{
    switch (event) {
    case SP__WS_MESSAGE:
        /* An empty message's data is "", never NULL. */
        *msg = (sp_ws_msg_t){(sp_ws_type_t)ws->rx.msg_type,
                             sp__buf_len(&ws->rx.msg) ? sp__buf_data(&ws->rx.msg) : "",
                             sp__buf_len(&ws->rx.msg)};
        return 0;
    case SP__WS_PING:
        if (ws->close_sent)
            return 1;
        return send_frame(ws, SP__WS_OP_PONG, ws->rx.ctl, ws->rx.ctl_len) < 0 ? -ECONNRESET
                                                                              : 1;
    case SP__WS_PONG:
        ws->pongs++;
        return 1;
    case SP__WS_CLOSE:
        return on_close(ws);
    }
    return 1;
}

/* Frames until a message, the end, or `until` (sp_now_ns clock; 0: none):
 * 0, -EAGAIN at `until`, or the connection's end as sp_ws_recv says. */
static int pump(sp_ws_t *ws, sp_ws_msg_t *msg, uint64_t until)
{
    for (;;) {
        while (sp__buf_len(&ws->in)) {
            int event;
            long k = sp__ws_rx_feed(&ws->rx, (const uint8_t *)sp__buf_data(&ws->in),
                                    sp__buf_len(&ws->in), &event);
            if (k < 0)
                return fail(ws, (int)-k);
            if (k == 0)
                break;
            sp_buf_consume(&ws->in, (size_t)k);
            /* Read to the end: the thread's input scratch goes back. */
            sp__http_scratch_return(&ws->in, &ws->in_borrowed, SP__SCRATCH_IN);
            int rc = on_event(ws, event, msg);
            if (rc <= 0)
                return rc;
        }
        if (stopping(ws))
            return going_away(ws);
        uint64_t idle = ws->idle_deadline;
        uint64_t at = idle && (!until || idle < until) ? idle : until;
        ssize_t n = sp__http_read_by(ws->deadline, ws->fd, ws->out.tls, &ws->in, &ws->in_borrowed,
                                     READ_SIZE, at, &ws->drained);
        if (n > 0) {
            touch(ws);
            continue;
        }
        if (n == -ETIMEDOUT)
            return at == until ? -EAGAIN : fail(ws, SP_WS_GOING_AWAY);
        if (stopping(ws)) /* the stop ended the read (http_conn.c) */
            return going_away(ws);
        ws->closed = true;
        return -ECONNRESET;
    }
}

int sp_ws_recv(sp_ws_t *ws, sp_ws_msg_t *msg, int64_t timeout_us)
{
    if (ws->rx.msg_type && !ws->rx.left && ws->rx.fin)
        sp__ws_rx_next(&ws->rx); /* the message returned last time */
    if (ws->closed)
        return -ENOTCONN;
    return pump(ws, msg, sp__http_deadline(timeout_us));
}

int sp_ws_send(sp_ws_t *ws, sp_ws_type_t type, const void *data, size_t len)
{
    if (type != SP_WS_TEXT && type != SP_WS_BINARY)
        return -EINVAL;
    if (ws->closed || ws->close_sent)
        return -ENOTCONN;
    sp__utf8_t u = {0, 0, 0};
    if (type == SP_WS_TEXT && (!sp__utf8_feed(&u, data, len) || u.need))
        return -EILSEQ;
    if (!sp__ws_z_wanted(ws->z, len))
        return send_frame(ws, type, data, len);
    sp_buf_t z = SP_BUF_INIT;
    long n = sp__ws_z_deflate(ws->z, data, len, &z);
    int rc = n < 0 ? (int)n : send_frame(ws, type | SP__WS_RSV1, sp__buf_data(&z), (size_t)n);
    sp_buf_free(&z);
    /* A stream that took the message in but could not send it is no
     * longer the one the peer inflates with: the connection is over. */
    if (n < 0)
        ws->closed = true;
    return rc;
}

int sp_ws_ping(sp_ws_t *ws, const void *data, size_t len)
{
    if (len > SP__WS_CTL_MAX)
        return -EINVAL;
    if (ws->closed || ws->close_sent)
        return -ENOTCONN;
    return send_frame(ws, SP__WS_OP_PING, data, len);
}

uint64_t sp_ws_pongs(const sp_ws_t *ws)
{
    return ws->pongs;
}

static bool close_args_ok(int code, const char *reason, size_t len)
{
    sp__utf8_t u = {0, 0, 0};
    if (!code)
        return !len;
    return sp__ws_code_ok(code) && len <= SP__WS_CTL_MAX - 2 &&
           sp__utf8_feed(&u, (const uint8_t *)reason, len) && !u.need;
}

int sp_ws_close(sp_ws_t *ws, int code, const char *reason)
{
    size_t len = reason ? strlen(reason) : 0;
    if (!close_args_ok(code, reason, len))
        return -EINVAL;
    if (ws->closed)
        return -ENOTCONN;
    int rc = ws->close_sent ? 0 : send_close(ws, code, reason, len);
    if (rc < 0)
        return rc;
    /* Messages still coming before the peer's close are dropped. */
    uint64_t until = sp__http_deadline(ws->opts.close_timeout_us);
    sp_ws_msg_t msg;
    while ((rc = sp_ws_recv(ws, &msg, sp__http_left_us(until))) == 0)
        ;
    if (rc == -EAGAIN) {
        ws->closed = true;
        return -ETIMEDOUT;
    }
    return ws->peer_code ? 0 : rc;
}

int sp_ws_close_code(const sp_ws_t *ws, const char **reason)
{
    if (reason)
        *reason = ws->peer_reason;
    return ws->peer_code;
}

sp_http_request_t *sp_ws_request(sp_ws_t *ws)
{
    return ws->req;
}
