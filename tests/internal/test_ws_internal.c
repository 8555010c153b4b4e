/* WebSocket internals: SHA-1 and base64 against their RFCs' test vectors,
 * the handshake's accept value (RFC 6455 1.3), the UTF-8 check, and the
 * frame receiver on hand-made frames (RFC 6455 5.7's examples). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/ws_internal.h"
#include "testutil.h"

static const char *hex(const uint8_t *p, size_t n)
{
    static char out[128];
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
    return out;
}

START_TEST(sha1_matches_fips_vectors)
{
    uint8_t d[20];
    sp__sha1("abc", 3, d);
    ck_assert_str_eq(hex(d, 20), "a9993e364706816aba3e25717850c26c9cd0d89d");
    sp__sha1("", 0, d);
    ck_assert_str_eq(hex(d, 20), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sp__sha1(two, strlen(two), d); /* 56 bytes: the padding takes a second block */
    ck_assert_str_eq(hex(d, 20), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    static char million[1000000];
    memset(million, 'a', sizeof million);
    sp__sha1(million, sizeof million, d);
    ck_assert_str_eq(hex(d, 20), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}
END_TEST

START_TEST(base64_matches_rfc4648_vectors)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char out[16];
        uint8_t back[16];
        sp__base64((const uint8_t *)plain[i], strlen(plain[i]), out);
        ck_assert_str_eq(out, coded[i]);
        ck_assert_int_eq(sp__base64_decode(coded[i], back, sizeof back), (int)strlen(plain[i]));
        ck_assert(!memcmp(back, plain[i], strlen(plain[i])));
    }
    uint8_t b[16];
    ck_assert_int_eq(sp__base64_decode("Zm9", b, sizeof b), -1);   /* not a multiple of 4 */
    ck_assert_int_eq(sp__base64_decode("Zm=v", b, sizeof b), -1);  /* padding inside */
    ck_assert_int_eq(sp__base64_decode("Zh==", b, sizeof b), -1);  /* stray bits */
    ck_assert_int_eq(sp__base64_decode("Zm9v*A==", b, sizeof b), -1);
    ck_assert_int_eq(sp__base64_decode("Zm9vYmFy", b, 5), -1);     /* too long for out */
}
END_TEST

START_TEST(accept_matches_rfc6455_sample)
{
    char out[29];
    sp__ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out);
    ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}
END_TEST

static bool utf8(const char *s, size_t n)
{
    sp__utf8_t u = {0, 0, 0};
    return sp__utf8_feed(&u, (const uint8_t *)s, n) && !u.need;
}

START_TEST(utf8_check_refuses_what_rfc3629_refuses)
{
    ck_assert(utf8("hello, world, long enough for words", 35));
    ck_assert(utf8("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", 11)); /* κόσμε */
    ck_assert(utf8("\xf4\x8f\xbf\xbf", 4));                              /* U+10FFFF */
    ck_assert(!utf8("\xf4\x90\x80\x80", 4));                             /* past it */
    ck_assert(!utf8("\xed\xa0\x80", 3));                                 /* surrogate */
    ck_assert(!utf8("\xc0\xaf", 2));                                     /* overlong */
    ck_assert(!utf8("\xe0\x80\xaf", 3));
    ck_assert(!utf8("\xf0\x80\x80\xaf", 4));
    ck_assert(!utf8("\xff", 1));
    ck_assert(!utf8("abc\xce", 4)); /* cut short */
    /* Fed in pieces: a character split between them is fine. */
    sp__utf8_t u = {0, 0, 0};
    ck_assert(sp__utf8_feed(&u, (const uint8_t *)"x\xe2\x82", 3));
    ck_assert(u.need);
    ck_assert(sp__utf8_feed(&u, (const uint8_t *)"\xac", 1));
    ck_assert(!u.need);
}
END_TEST

/* Feed all of p to rx: the last event, or a close code (negative). */
static long feed_all(sp__ws_rx_t *rx, const char *p, size_t n, int *event)
{
    size_t at = 0;
    long k = 1;
    *event = SP__WS_NONE;
    while (at < n && k > 0) {
        k = sp__ws_rx_feed(rx, (const uint8_t *)p + at, n - at, event);
        at += k > 0 ? (size_t)k : 0;
    }
    return k < 0 ? k : (long)at;
}

START_TEST(receiver_takes_rfc6455_examples)
{
    sp__ws_rx_t rx;
    int ev;
    sp__ws_rx_init(&rx, false, 1 << 20); /* from a server: unmasked */
    ck_assert_int_eq(feed_all(&rx, "\x81\x05Hello", 7, &ev), 7);
    ck_assert_int_eq(ev, SP__WS_MESSAGE);
    ck_assert_int_eq(rx.msg_type, SP_WS_TEXT);
    ck_assert_int_eq(sp_buf_len(&rx.msg), 5);
    sp__ws_rx_next(&rx);
    /* Fragmented, with a ping between the fragments. */
    ck_assert_int_eq(feed_all(&rx, "\x01\x03Hel", 5, &ev), 5);
    ck_assert_int_eq(ev, SP__WS_NONE);
    ck_assert_int_eq(feed_all(&rx, "\x89\x02hi", 4, &ev), 4);
    ck_assert_int_eq(ev, SP__WS_PING);
    ck_assert_int_eq(feed_all(&rx, "\x80\x02lo", 4, &ev), 4);
    ck_assert_int_eq(ev, SP__WS_MESSAGE);
    ck_assert(!memcmp(sp_buf_data(&rx.msg), "Hello", 5));
    sp__ws_rx_free(&rx);

    sp__ws_rx_init(&rx, true, 1 << 20); /* from a client: masked */
    ck_assert_int_eq(feed_all(&rx, "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11, &ev), 11);
    ck_assert_int_eq(ev, SP__WS_MESSAGE);
    ck_assert(!memcmp(sp_buf_data(&rx.msg), "Hello", 5));
    sp__ws_rx_next(&rx);
    ck_assert_int_eq(feed_all(&rx, "\x81\x05Hello", 7, &ev), -SP_WS_PROTOCOL_ERROR);
    sp__ws_rx_free(&rx);
}
END_TEST

START_TEST(receiver_refuses_broken_frames)
{
    static const struct {
        const char *bytes;
        size_t len;
        long want;
    } cases[] = {
        {"\xc1\x00", 2, -SP_WS_PROTOCOL_ERROR},           /* RSV1 */
        {"\x83\x00", 2, -SP_WS_PROTOCOL_ERROR},           /* opcode 3 */
        {"\x8b\x00", 2, -SP_WS_PROTOCOL_ERROR},           /* opcode 11 */
        {"\x80\x00", 2, -SP_WS_PROTOCOL_ERROR},           /* continuation of nothing */
        {"\x09\x00", 2, -SP_WS_PROTOCOL_ERROR},           /* fragmented ping */
        {"\x89\x7e\x00\x7e", 4, -SP_WS_PROTOCOL_ERROR},   /* 126-byte ping */
        {"\x01\x00\x81\x00", 4, -SP_WS_PROTOCOL_ERROR},   /* new message inside one */
        {"\x81\x02\xc3\x28", 4, -SP_WS_INVALID_DATA},     /* bad UTF-8 */
        {"\x01\x01\xc3\x80\x00", 5, -SP_WS_INVALID_DATA}, /* cut at the end */
        {"\x82\x7f\x80\0\0\0\0\0\0\0", 10, -SP_WS_PROTOCOL_ERROR}, /* top length bit */
        {"\x82\x7e\x04\x01", 4, -SP_WS_TOO_BIG},          /* 1025 > 1024 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sp__ws_rx_t rx;
        int ev;
        sp__ws_rx_init(&rx, false, 1024);
        ck_assert_msg(feed_all(&rx, cases[i].bytes, cases[i].len, &ev) == cases[i].want,
                      "case %zu", i);
        sp__ws_rx_free(&rx);
    }
    int code;
    ck_assert_int_eq(sp__ws_close_payload((const uint8_t *)"", 0, &code), 0);
    ck_assert_int_eq(code, SP_WS_NO_STATUS);
    ck_assert_int_eq(sp__ws_close_payload((const uint8_t *)"\x03", 1, &code), 1002);
    ck_assert_int_eq(sp__ws_close_payload((const uint8_t *)"\x03\xed", 2, &code), 1002);
    ck_assert_int_eq(sp__ws_close_payload((const uint8_t *)"\x0f\xa0\xff", 3, &code), 1007);
    ck_assert_int_eq(sp__ws_close_payload((const uint8_t *)"\x0f\xa0ok", 4, &code), 0);
    ck_assert_int_eq(code, 4000);
}
END_TEST

START_TEST(frame_header_and_mask_round_trip)
{
    uint8_t h[SP__WS_HEAD_MAX], key[4] = {1, 2, 3, 4};
    ck_assert_uint_eq(sp__ws_head(h, SP_WS_TEXT, 5, NULL), 2);
    ck_assert_uint_eq(sp__ws_head(h, SP_WS_TEXT, 126, NULL), 4);
    ck_assert_uint_eq(sp__ws_head(h, SP_WS_BINARY, 65536, key), 14);
    ck_assert_uint_eq(h[1], 0xff);
    uint8_t p[37], q[37];
    for (int i = 0; i < 37; i++)
        p[i] = q[i] = (uint8_t)i;
    sp__ws_mask(p, 37, key, 0);
    sp__ws_mask(p, 3, key, 0); /* the same key in two pieces undoes it */
    sp__ws_mask(p + 3, 34, key, 3);
    ck_assert(!memcmp(p, q, 37));
}
END_TEST

/* ---- permessage-deflate ---------------------------------------------------- */

/* The server's answer to an offer with window limit bits, "" if declined. */
static const char *accepted(const char *offers, int bits)
{
    static char out[SP__WS_PMD_TEXT];
    sp__ws_pmd_t p;
    if (!sp__ws_pmd_accept(offers, bits, &p, out))
        out[0] = '\0';
    return out;
}

START_TEST(pmd_server_answers_offers_per_rfc7692)
{
    ck_assert_str_eq(accepted("permessage-deflate", 15), "permessage-deflate");
    ck_assert_str_eq(accepted("permessage-deflate", 12),
                     "permessage-deflate; server_max_window_bits=12");
    ck_assert_str_eq(accepted("permessage-deflate; client_max_window_bits", 12),
                     "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12");
    ck_assert_str_eq(accepted("permessage-deflate;client_max_window_bits=\"10\";"
                              " server_max_window_bits=9", 12),
                     "permessage-deflate; server_max_window_bits=9; client_max_window_bits=10");
    ck_assert_str_eq(accepted("Permessage-Deflate; server_no_context_takeover ;"
                              "client_no_context_takeover", 15),
                     "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
    /* The first offer that can be honoured, past others and other extensions. */
    ck_assert_str_eq(accepted("x-webkit-deflate-frame, permessage-deflate; "
                              "server_max_window_bits=8, permessage-deflate; x=1, "
                              "permessage-deflate; server_max_window_bits=14", 15),
                     "permessage-deflate; server_max_window_bits=14");
    static const char *const declined[] = {
        "", "x-foo", "permessage-deflate; server_max_window_bits=8", /* zlib cannot */
        "permessage-deflate; server_max_window_bits", "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=08", "permessage-deflate; mystery",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_max_window_bits=\"9", "permessage-deflate;",
        "permessage-deflate garbage", "@, permessage-deflate"};
    for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++)
        ck_assert_msg(!accepted(declined[i], 15)[0], "offer %s", declined[i]);
}
END_TEST

START_TEST(pmd_client_checks_the_answer)
{
    char offer[SP__WS_PMD_TEXT];
    sp__ws_pmd_offer(15, offer);
    ck_assert_str_eq(offer, "permessage-deflate; client_max_window_bits");
    sp__ws_pmd_offer(10, offer);
    ck_assert_str_eq(offer,
                     "permessage-deflate; server_max_window_bits=10; client_max_window_bits=10");
    sp__ws_pmd_t p;
    ck_assert_int_eq(sp__ws_pmd_check(NULL, 15, &p), 0);
    ck_assert_int_eq(sp__ws_pmd_check("permessage-deflate", 15, &p), 1);
    ck_assert_int_eq(p.server_bits, 15);
    ck_assert_int_eq(p.client_bits, 15);
    ck_assert_int_eq(sp__ws_pmd_check("permessage-deflate; server_no_context_takeover; "
                                      "client_max_window_bits=9; server_max_window_bits=10",
                                      10, &p), 1);
    ck_assert(p.server_no_takeover && !p.client_no_takeover);
    ck_assert_int_eq(p.server_bits, 10);
    ck_assert_int_eq(p.client_bits, 9);
    static const struct {
        const char *answer;
        int bits;
    } bad[] = {
        {"x-foo", 15},
        {"permessage-deflate, permessage-deflate", 15},
        {"permessage-deflate", 12},                            /* our server limit ignored */
        {"permessage-deflate; server_max_window_bits=13", 12}, /* over it */
        {"permessage-deflate; client_max_window_bits=8", 15},  /* zlib cannot */
        {"permessage-deflate; client_max_window_bits=13; server_max_window_bits=12", 12},
        {"permessage-deflate; client_max_window_bits", 15},
        {"permessage-deflate; unknown", 15},
        {"permessage-deflate; server_max_window_bits=7", 15},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(sp__ws_pmd_check(bad[i].answer, bad[i].bits, &p) == -EPROTO, "answer %s",
                      bad[i].answer);
}
END_TEST

/* A frame (FIN) of one message compressed by z, RSV1 set, unmasked. */
static void zframe(sp__ws_z_t *z, int op, const void *p, size_t n, sp_buf_t *out)
{
    sp_buf_t c = SP_BUF_INIT;
    long len = sp__ws_z_deflate(z, p, n, &c);
    ck_assert_int_ge(len, 0);
    uint8_t h[SP__WS_HEAD_MAX];
    sp_buf_clear(out);
    ck_assert_int_eq(sp_buf_append(out, h, sp__ws_head(h, op | SP__WS_RSV1, (uint64_t)len, NULL)),
                     0);
    ck_assert_int_eq(sp_buf_append(out, sp_buf_data(&c), (size_t)len), 0);
    sp_buf_free(&c);
}

/* A server's z and a client's receiver with its z. */
typedef struct pair {
    sp__ws_z_t *server, *client;
    sp__ws_rx_t rx;
    sp_buf_t frame;
} pair_t;

static void pair_open(pair_t *pr, const sp__ws_pmd_t *p, size_t max)
{
    pr->server = sp__ws_z_new(p, false);
    pr->client = sp__ws_z_new(p, true);
    ck_assert(pr->server && pr->client);
    sp__ws_rx_init(&pr->rx, false, max);
    pr->rx.z = pr->client;
    sp_buf_init(&pr->frame);
}

static void pair_close(pair_t *pr)
{
    sp__ws_rx_free(&pr->rx);
    sp__ws_z_free(pr->server);
    sp__ws_z_free(pr->client);
    sp_buf_free(&pr->frame);
}

/* The message through the pair: the compressed frame's length. */
static size_t pass(pair_t *pr, int op, const char *text, size_t n)
{
    int ev;
    zframe(pr->server, op, text, n, &pr->frame);
    size_t len = sp_buf_len(&pr->frame);
    ck_assert_int_eq(feed_all(&pr->rx, sp_buf_data(&pr->frame), len, &ev), (long)len);
    ck_assert_int_eq(ev, SP__WS_MESSAGE);
    ck_assert_uint_eq(sp_buf_len(&pr->rx.msg), n);
    ck_assert(!memcmp(sp_buf_data(&pr->rx.msg), text, n));
    sp__ws_rx_next(&pr->rx);
    return len;
}

START_TEST(deflate_round_trip_with_and_without_context_takeover)
{
    static const char text[] = "The quick brown fox jumps over the lazy dog, "
                               "and the lazy dog lets the quick brown fox jump.";
    size_t n = sizeof text - 1;
    pair_t pr;
    pair_open(&pr, &(sp__ws_pmd_t){false, false, 12, 12}, 1 << 20);
    size_t first = pass(&pr, SP_WS_TEXT, text, n);
    ck_assert_uint_lt(pass(&pr, SP_WS_TEXT, text, n), first / 2); /* a back reference */
    pass(&pr, SP_WS_BINARY, "", 0);
    pair_close(&pr);
    pair_open(&pr, &(sp__ws_pmd_t){true, false, 9, 15}, 1 << 20);
    first = pass(&pr, SP_WS_TEXT, text, n);
    ck_assert_uint_eq(pass(&pr, SP_WS_TEXT, text, n), first); /* each alone */
    /* Fragments of one compressed message are inflated as one stream. */
    int ev;
    zframe(pr.server, SP_WS_TEXT, text, n, &pr.frame);
    const uint8_t *f = (const uint8_t *)sp_buf_data(&pr.frame);
    size_t len = sp_buf_len(&pr.frame) - 2, cut = len / 2;
    char two[256];
    memcpy(two, (const uint8_t[]){SP_WS_TEXT | SP__WS_RSV1, (uint8_t)cut}, 2);
    memcpy(two + 2, f + 2, cut);
    memcpy(two + 2 + cut, (const uint8_t[]){0x80, (uint8_t)(len - cut)}, 2);
    memcpy(two + 4 + cut, f + 2 + cut, len - cut);
    ck_assert_int_eq(feed_all(&pr.rx, two, len + 4, &ev), (long)len + 4);
    ck_assert_int_eq(ev, SP__WS_MESSAGE);
    ck_assert(!memcmp(sp_buf_data(&pr.rx.msg), text, n));
    pair_close(&pr);
}
END_TEST

/* 10 MiB of zeros in about 10 KB: refused at the limit, holding no more. */
START_TEST(deflate_bomb_stops_at_max_message)
{
    enum { MAX = 64 * 1024 };
    size_t big = 10u << 20;
    char *zeros = calloc(1, big);
    pair_t pr;
    pair_open(&pr, &(sp__ws_pmd_t){false, false, 15, 15}, MAX);
    zframe(pr.server, SP_WS_BINARY, zeros, big, &pr.frame);
    ck_assert_uint_lt(sp_buf_len(&pr.frame), 16384);
    int ev;
    ck_assert_int_eq(feed_all(&pr.rx, sp_buf_data(&pr.frame), sp_buf_len(&pr.frame), &ev),
                     -SP_WS_TOO_BIG);
    ck_assert_uint_le(pr.rx.msg.cap, MAX);
    pair_close(&pr);
    /* Exactly the limit is fine. */
    pair_open(&pr, &(sp__ws_pmd_t){false, false, 15, 15}, MAX);
    pass(&pr, SP_WS_BINARY, zeros, MAX);
    ck_assert_uint_le(pr.rx.msg.cap, MAX);
    pair_close(&pr);
    free(zeros);
}
END_TEST

START_TEST(deflate_frames_keep_the_rules)
{
    pair_t pr;
    int ev;
    pair_open(&pr, &(sp__ws_pmd_t){false, false, 15, 15}, 1 << 20);
    static const struct {
        const char *bytes;
        size_t len;
        long want;
    } cases[] = {
        {"\xc9\x00", 2, -SP_WS_PROTOCOL_ERROR},              /* RSV1 on a ping */
        {"\x41\x01\x00\xc0\x00", 5, -SP_WS_PROTOCOL_ERROR},  /* on a continuation */
        {"\xa1\x00", 2, -SP_WS_PROTOCOL_ERROR},              /* RSV2 */
        {"\xc1\x01\xff", 3, -SP_WS_PROTOCOL_ERROR},          /* not deflate data */
        {"\xc1\x04\x03\x00\xff\xff", 6, -SP_WS_PROTOCOL_ERROR}, /* BFINAL, junk after */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_msg(feed_all(&pr.rx, cases[i].bytes, cases[i].len, &ev) == cases[i].want,
                      "case %zu", i);
        pair_close(&pr); /* a refused stream is not used again */
        pair_open(&pr, &(sp__ws_pmd_t){false, false, 15, 15}, 1 << 20);
    }
    /* A final block (BFINAL) ends a stream; the tail starts the next. */
    ck_assert_int_eq(feed_all(&pr.rx, "\xc1\x02\x03\x00", 4, &ev), 4);
    ck_assert_int_eq(ev, SP__WS_MESSAGE);
    pair_close(&pr);
    /* Inflated text is checked: bad UTF-8 inside is 1007. */
    pair_open(&pr, &(sp__ws_pmd_t){false, false, 15, 15}, 1 << 20);
    char bad[100];
    memset(bad, 'a', sizeof bad);
    bad[60] = (char)0xff;
    zframe(pr.server, SP_WS_TEXT, bad, sizeof bad, &pr.frame);
    ck_assert_int_eq(feed_all(&pr.rx, sp_buf_data(&pr.frame), sp_buf_len(&pr.frame), &ev),
                     -SP_WS_INVALID_DATA);
    pair_close(&pr);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ws_internal");
    SP_TEST_CASE(s, "ws", 0, NULL, NULL, sha1_matches_fips_vectors,
                 base64_matches_rfc4648_vectors, accept_matches_rfc6455_sample,
                 utf8_check_refuses_what_rfc3629_refuses, receiver_takes_rfc6455_examples,
                 receiver_refuses_broken_frames, frame_header_and_mask_round_trip,
                 pmd_server_answers_offers_per_rfc7692, pmd_client_checks_the_answer,
                 deflate_round_trip_with_and_without_context_takeover,
                 deflate_bomb_stops_at_max_message, deflate_frames_keep_the_rules);
    return sp_test_run(s);
}
