/* SHA-1 (FIPS 180-4) and base64 (RFC 4648) for the WebSocket handshake
 * only: Sec-WebSocket-Accept = base64(SHA-1(key + GUID)). SHA-1 is no
 * longer a safe hash, and nothing else here may use it as one. */
#include <string.h>

#include "ws_internal.h"

static uint32_t rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static void block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20)
            f = (b & c) | (~b & d), k = 0x5A827999;
        else if (i < 40)
            f = b ^ c ^ d, k = 0x6ED9EBA1;
        else if (i < 60)
            f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
        else
            f = b ^ c ^ d, k = 0xCA62C1D6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d, d = c, c = rol(b, 30), b = a, a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

void sp__sha1(const void *data, size_t len, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    const uint8_t *p = data;
    size_t left = len;
    for (; left >= 64; p += 64, left -= 64)
        block(h, p);
    /* The tail, a 1 bit, zeros, and the length in bits: one or two blocks. */
    uint8_t last[128] = {0};
    memcpy(last, p, left);
    last[left] = 0x80;
    size_t n = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        last[n - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t off = 0; off < n; off += 64)
        block(h, last + off);
    for (int i = 0; i < 20; i++)
        out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t sp__base64(const uint8_t *p, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

static int sextet(char ch)
{
    const char *at = ch ? strchr(b64, ch) : NULL;
    return at ? (int)(at - b64) : -1;
}

int sp__base64_decode(const char *s, uint8_t *out, size_t cap)
{
    size_t len = strlen(s), o = 0;
    if (len % 4)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int pad = (s[i + 3] == '=') + (s[i + 2] == '=' && s[i + 3] == '=');
        if (pad && i + 4 != len)
            return -1;
        int v[4];
        for (int j = 0; j < 4 - pad; j++)
            if ((v[j] = sextet(s[i + j])) < 0)
                return -1;
        for (int j = 4 - pad; j < 4; j++)
            v[j] = 0;
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        if ((pad == 1 && (x & 0xff)) || (pad == 2 && (x & 0xffff)))
            return -1; /* bits past the data: not the canonical form */
        for (int j = 0; j < 3 - pad; j++) {
            if (o == cap)
                return -1;
            out[o++] = (uint8_t)(x >> (16 - 8 * j));
        }
    }
    return (int)o;
}

void sp__ws_accept(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char text[128];
    size_t k = strnlen(key, sizeof text - sizeof guid);
    memcpy(text, key, k);
    memcpy(text + k, guid, sizeof guid - 1);
    uint8_t digest[20];
    sp__sha1(text, k + sizeof guid - 1, digest);
    sp__base64(digest, sizeof digest, out);
}
