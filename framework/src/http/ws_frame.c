/* WebSocket frames (RFC 6455 5): the receiver, which takes bytes as they
 * come and checks every rule a frame or message must keep, and the
 * header and masking of frames sent. No I/O here: ws_conn.c reads and
 * writes, and tests/fuzz/fuzz_ws.c drives the receiver alone.
 *
 * Data frames' payloads are taken as they arrive (unmasked and checked
 * into the message being joined; a compressed message's inflated into it,
 * ws_deflate.c), so a big frame never has to be held whole in the input
 * buffer too; a control frame (125 bytes at most) is taken only whole. */
#include <string.h>

#include "ws_internal.h"

bool sp__utf8_feed(sp__utf8_t *u, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        if (u->need) {
            if (b < u->lo || b > u->hi)
                return false;
            u->lo = 0x80, u->hi = 0xBF;
            u->need--;
            i++;
            continue;
        }
        if (b < 0x80) {
            /* ASCII runs go eight bytes at a time. */
            uint64_t w;
            while (i + 8 <= n && (memcpy(&w, p + i, 8), !(w & 0x8080808080808080ull)))
                i += 8;
            while (i < n && p[i] < 0x80)
                i++;
            continue;
        }
        u->lo = 0x80, u->hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF)
            u->need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            u->need = 2;
            if (b == 0xE0)
                u->lo = 0xA0; /* overlong */
            else if (b == 0xED)
                u->hi = 0x9F; /* surrogates */
        } else if (b >= 0xF0 && b <= 0xF4) {
            u->need = 3;
            if (b == 0xF0)
                u->lo = 0x90; /* overlong */
            else if (b == 0xF4)
                u->hi = 0x8F; /* past U+10FFFF */
        } else {
            return false;
        }
        i++;
    }
    return true;
}

void sp__ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], size_t at)
{
    size_t i = 0;
    for (; i < n && ((at + i) & 3); i++)
        p[i] ^= mask[(at + i) & 3];
    /* Aligned on the key now: a word of it twice over. */
    uint8_t m8[8] = {mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3]};
    uint64_t m;
    memcpy(&m, m8, 8);
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        w ^= m;
        memcpy(p + i, &w, 8);
    }
    for (; i < n; i++)
        p[i] ^= mask[(at + i) & 3];
}

size_t sp__ws_head(uint8_t out[SP__WS_HEAD_MAX], int opcode, uint64_t len,
                   const uint8_t *mask)
{
    size_t n = 2;
    out[0] = (uint8_t)(0x80 | opcode);
    uint8_t m = mask ? 0x80 : 0;
    if (len < 126) {
        out[1] = (uint8_t)(m | len);
    } else if (len <= 0xffff) {
        out[1] = m | 126;
        out[2] = (uint8_t)(len >> 8), out[3] = (uint8_t)len;
        n = 4;
    } else {
        out[1] = m | 127;
        for (int i = 0; i < 8; i++)
            out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        n = 10;
    }
    if (mask) {
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}

void sp__ws_buf_trim(sp_buf_t *b)
{
    if (b->cap > SP__WS_KEEP)
        sp_buf_free(b);
    else
        sp_buf_clear(b);
}

bool sp__ws_code_ok(int code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

int sp__ws_close_payload(const uint8_t *p, size_t n, int *code)
{
    *code = SP_WS_NO_STATUS;
    if (n == 0)
        return 0;
    if (n == 1)
        return SP_WS_PROTOCOL_ERROR;
    *code = p[0] << 8 | p[1];
    if (!sp__ws_code_ok(*code))
        return SP_WS_PROTOCOL_ERROR;
    sp__utf8_t u = {0, 0, 0};
    return sp__utf8_feed(&u, p + 2, n - 2) && !u.need ? 0 : SP_WS_INVALID_DATA;
}

void sp__ws_rx_init(sp__ws_rx_t *rx, bool from_client, size_t max_message)
{
    memset(rx, 0, sizeof *rx);
    rx->from_client = from_client;
    rx->max_message = max_message;
    sp_buf_init(&rx->msg);
}

void sp__ws_rx_free(sp__ws_rx_t *rx)
{
    sp_buf_free(&rx->msg);
}

/* The message's bytes from `at` on, if text: 0 or -1007. */
static long check_text(sp__ws_rx_t *rx, size_t at)
{
    if (rx->msg_type != SP_WS_TEXT ||
        sp__utf8_feed(&rx->utf8, (const uint8_t *)sp__buf_data(&rx->msg) + at,
                      sp__buf_len(&rx->msg) - at))
        return 0;
    return -SP_WS_INVALID_DATA;
}

void sp__ws_rx_next(sp__ws_rx_t *rx)
{
    sp__ws_buf_trim(&rx->msg);
    rx->msg_type = 0;
}

/* A data frame's payload is all in: the end of its message? */
static long end_frame(sp__ws_rx_t *rx, int *event)
{
    if (!rx->fin)
        return 0;
    if (rx->deflated) {
        size_t at = sp__buf_len(&rx->msg);
        int rc = sp__ws_z_inflate_end(rx->z, &rx->msg, rx->max_message);
        long bad = check_text(rx, at);
        if (bad || rc < 0)
            return bad ? bad : rc;
    }
    if (rx->msg_type == SP_WS_TEXT && rx->utf8.need)
        return -SP_WS_INVALID_DATA; /* a character cut at the end */
    *event = SP__WS_MESSAGE;
    return 0;
}

/* Payload bytes of a compressed message, unmasked by the piece. The text
 * check comes before inflate's verdict, so a message is judged by the same
 * bytes whatever the reads that brought it. */
static long inflate_payload(sp__ws_rx_t *rx, const uint8_t *p, size_t k)
{
    uint8_t piece[2048];
    for (size_t i = 0, n; i < k; i += n) {
        n = k - i < sizeof piece ? k - i : sizeof piece;
        const uint8_t *in = p + i;
        if (rx->from_client) {
            memcpy(piece, in, n);
            sp__ws_mask(piece, n, rx->mask, rx->mask_at + i);
            in = piece;
        }
        size_t at = sp__buf_len(&rx->msg);
        int rc = sp__ws_z_inflate(rx->z, in, n, &rx->msg, rx->max_message);
        long bad = check_text(rx, at);
        if (bad || rc < 0)
            return bad ? bad : rc;
    }
    return 0;
}

static long take_payload(sp__ws_rx_t *rx, const uint8_t *p, size_t n, int *event)
{
    size_t k = n < rx->left ? n : (size_t)rx->left;
    if (rx->deflated) {
        long rc = inflate_payload(rx, p, k);
        if (rc < 0)
            return rc;
    } else {
        size_t at = sp__buf_len(&rx->msg);
        if (sp__buf_append(&rx->msg, p, k) < 0)
            return -SP_WS_INTERNAL_ERROR;
        if (rx->from_client)
            sp__ws_mask((uint8_t *)sp__buf_data(&rx->msg) + at, k, rx->mask, rx->mask_at);
        long bad = check_text(rx, at);
        if (bad)
            return bad;
    }
    rx->mask_at += k;
    rx->left -= k;
    long rc = rx->left ? 0 : end_frame(rx, event);
    return rc < 0 ? rc : (long)k;
}

/* A control frame, whole in p[0, n) or not yet. */
static long take_control(sp__ws_rx_t *rx, int op, const uint8_t *p, size_t n,
                         size_t head, uint64_t len, int *event)
{
    if (n - head < len)
        return 0;
    memcpy(rx->ctl, p + head, (size_t)len);
    rx->ctl_len = (size_t)len;
    if (rx->from_client)
        sp__ws_mask(rx->ctl, rx->ctl_len, rx->mask, 0);
    *event = op == SP__WS_OP_CLOSE ? SP__WS_CLOSE : op == SP__WS_OP_PING ? SP__WS_PING
                                                                         : SP__WS_PONG;
    return (long)(head + len);
}

/* The header's length field, once its bytes are in: 0 or -1002. */
static long head_len(const uint8_t *p, size_t n, size_t *head, uint64_t *len)
{
    *len = p[1] & 127;
    *head = 2 + (p[1] & 0x80 ? 4 : 0) + (*len == 126 ? 2 : *len == 127 ? 8 : 0);
    if (n < *head)
        return 1;
    if (*len == 126) {
        *len = (uint64_t)p[2] << 8 | p[3];
    } else if (*len == 127) {
        *len = 0;
        for (int i = 0; i < 8; i++)
            *len = *len << 8 | p[2 + i];
        if (*len >> 63)
            return -SP_WS_PROTOCOL_ERROR; /* the top bit must be 0 */
    }
    return 0;
}

/* A frame of len bytes would take its message past the limit. The
 * compressed bytes of a message get a little more than max_message (what
 * deflate adds to bytes it cannot shrink); what they inflate to is held
 * to max_message as it comes. */
static bool too_big(const sp__ws_rx_t *rx, uint64_t len)
{
    size_t max = rx->max_message;
    if (!rx->deflated)
        return len > max - sp__buf_len(&rx->msg);
    uint64_t zmax = max > SIZE_MAX / 2 ? max : max + max / 1024 + 64;
    return len > zmax - rx->zin;
}

long sp__ws_rx_feed(sp__ws_rx_t *rx, const uint8_t *p, size_t n, int *event)
{
    *event = SP__WS_NONE;
    if (n == 0)
        return 0;
    if (rx->left)
        return take_payload(rx, p, n, event);
    if (n < 2)
        return 0;
    int op = p[0] & 15, rsv = p[0] & 0x70;
    bool fin = p[0] & 0x80, masked = p[1] & 0x80;
    /* RSV1 only with permessage-deflate, and only on a message's first
     * frame (RFC 7692 6). */
    bool rsv_ok = !rsv || (rsv == SP__WS_RSV1 && rx->z && op != SP__WS_OP_CONT &&
                           op < SP__WS_OP_CLOSE);
    if (!rsv_ok || masked != rx->from_client)
        return -SP_WS_PROTOCOL_ERROR;
    size_t head;
    uint64_t len;
    long rc = head_len(p, n, &head, &len);
    if (rc)
        return rc < 0 ? rc : 0;
    if (masked)
        memcpy(rx->mask, p + head - 4, 4);
    rx->mask_at = 0;
    if (op >= SP__WS_OP_CLOSE) {
        if (op > SP__WS_OP_PONG || !fin || len > SP__WS_CTL_MAX)
            return -SP_WS_PROTOCOL_ERROR;
        return take_control(rx, op, p, n, head, len, event);
    }
    if (op > SP_WS_BINARY || (op == SP__WS_OP_CONT) != (rx->msg_type != 0))
        return -SP_WS_PROTOCOL_ERROR; /* bad opcode; continuation out of place */
    if (op != SP__WS_OP_CONT) {
        rx->msg_type = op;
        rx->utf8 = (sp__utf8_t){0, 0, 0};
        rx->deflated = rsv;
        rx->zin = 0;
    }
    if (too_big(rx, len))
        return -SP_WS_TOO_BIG;
    rx->zin += len;
    rx->left = len;
    rx->fin = fin;
    rc = len ? 0 : end_frame(rx, event);
    return rc < 0 ? rc : (long)head;
}
