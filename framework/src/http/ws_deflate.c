/* permessage-deflate's compression (RFC 7692 7.2) with zlib: a raw
 * deflate stream each way, made when the extension is negotiated, with
 * the windows the handshake agreed on.
 *
 * Received messages are inflated as their payload arrives (never held
 * compressed), into a message buffer that may not pass the message limit:
 * zlib is given only the room left under it, and when that is full one
 * more byte asked for tells a bomb (1009) from a message that fits
 * exactly. So a small frame that inflates to gigabytes costs the limit's
 * memory and the CPU to fill it, no more. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ws_internal.h"

struct sp__ws_z {
    z_stream in, out;
    bool in_reset;  /* the peer compresses each message alone */
    bool out_reset; /* and so do we */
};

/* zlib's hash table sized with the window (15 bits: its default 8). */
static int mem_level(int bits)
{
    return bits > 8 ? bits - 7 : 1;
}

sp__ws_z_t *sp__ws_z_new(const sp__ws_pmd_t *p, bool client)
{
    sp__ws_z_t *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    int ours = client ? p->client_bits : p->server_bits;
    z->out_reset = client ? p->client_no_takeover : p->server_no_takeover;
    z->in_reset = client ? p->server_no_takeover : p->client_no_takeover;
    /* Inflate with the format's whole window, whatever the peer agreed
     * to: zlib checks a match's distance against its window plus what the
     * current call has written, so with a smaller window a peer reaching
     * past the one it agreed to would be refused or not depending on
     * where the reads split its bytes. With 32 KiB no distance is past
     * the window, and only one before the stream's start is refused. */
    if (inflateInit2(&z->in, -MAX_WBITS) != Z_OK) {
        free(z);
        return NULL;
    }
    if (deflateInit2(&z->out, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -ours, mem_level(ours),
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        inflateEnd(&z->in);
        free(z);
        return NULL;
    }
    return z;
}

void sp__ws_z_free(sp__ws_z_t *z)
{
    if (!z)
        return;
    inflateEnd(&z->in);
    deflateEnd(&z->out);
    free(z);
}

/* zlib's verdict as a close code: 0, or what the message gets. */
static int z_code(int rc)
{
    if (rc == Z_MEM_ERROR)
        return -SP_WS_INTERNAL_ERROR;
    return rc == Z_OK || rc == Z_BUF_ERROR || rc == Z_STREAM_END ? 0 : -SP_WS_PROTOCOL_ERROR;
}

/* Inflate what z->in holds onto out, up to max bytes in all. */
static int inflate_some(sp__ws_z_t *z, sp_buf_t *out, size_t max)
{
    for (;;) {
        /* Room as the buffer grows (doubling), not more: a small message
         * keeps a small buffer. */
        size_t have = sp__buf_len(out), want = have > 1024 ? have : 1024;
        size_t room = max - have < want ? max - have : want;
        uint8_t probe;
        uint8_t *to = &probe;
        if (room && !(to = (uint8_t *)sp__buf_reserve(out, room)))
            return -SP_WS_INTERNAL_ERROR;
        /* At the limit: one byte more, into `probe`, is a message too big. */
        z->in.next_out = to;
        z->in.avail_out = room ? (uInt)room : 1;
        int rc = inflate(&z->in, Z_SYNC_FLUSH);
        size_t made = (room ? room : 1) - z->in.avail_out;
        if (!room && made)
            return -SP_WS_TOO_BIG;
        sp__buf_commit(out, made);
        if (rc == Z_STREAM_END) {
            /* A final block (BFINAL): what follows starts a new stream. */
            rc = inflateReset(&z->in);
        }
        if (z_code(rc) < 0)
            return z_code(rc);
        if (!z->in.avail_in && z->in.avail_out)
            return 0;
    }
}

int sp__ws_z_inflate(sp__ws_z_t *z, const uint8_t *p, size_t n, sp_buf_t *out, size_t max)
{
    z->in.next_in = (Bytef *)p;
    z->in.avail_in = (uInt)n;
    return inflate_some(z, out, max);
}

int sp__ws_z_inflate_end(sp__ws_z_t *z, sp_buf_t *out, size_t max)
{
    static const uint8_t tail[4] = {0, 0, 0xff, 0xff};
    int rc = sp__ws_z_inflate(z, tail, sizeof tail, out, max);
    if (rc == 0 && z->in_reset)
        inflateReset(&z->in);
    return rc;
}

long sp__ws_z_deflate(sp__ws_z_t *z, const void *p, size_t n, sp_buf_t *out)
{
    /* Nothing to flush would make zlib write nothing: an empty stored
     * block, as RFC 7692 7.2.3.6 has it. */
    if (!n)
        return sp__buf_append(out, "", 1) < 0 ? -ENOMEM : 1;
    z->out.next_in = (Bytef *)p;
    z->out.avail_in = (uInt)n;
    size_t room = deflateBound(&z->out, (uLong)n) + 16;
    do {
        uint8_t *to = (uint8_t *)sp__buf_reserve(out, room);
        if (!to)
            return -ENOMEM;
        z->out.next_out = to;
        z->out.avail_out = (uInt)room;
        if (deflate(&z->out, Z_SYNC_FLUSH) == Z_STREAM_ERROR)
            return -EIO;
        sp__buf_commit(out, room - z->out.avail_out);
        room = 4096;
    } while (!z->out.avail_out || z->out.avail_in);
    /* The sync flush ends with an empty stored block, 00 00 ff ff, which
     * the receiver puts back (RFC 7692 7.2.1). */
    size_t len = sp__buf_len(out);
    if (len < 4 || memcmp(sp__buf_data(out) + len - 4, "\0\0\xff\xff", 4))
        return -EIO;
    if (z->out_reset)
        deflateReset(&z->out);
    return (long)(len - 4);
}

bool sp__ws_z_wanted(const sp__ws_z_t *z, size_t len)
{
    /* Tiny messages would not shrink; past 1 GiB zlib's counters (uInt)
     * would need the message in pieces. */
    return z && len >= SP__WS_Z_MIN && len <= (size_t)1 << 30;
}
