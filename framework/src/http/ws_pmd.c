/* permessage-deflate negotiation (RFC 7692 7.1): the server picks the
 * first offer in Sec-WebSocket-Extensions it can honour and answers it;
 * the client makes one offer and checks the answer.
 *
 * Header values are lists of `name *(; param[=value])` (RFC 6455 9.1), a
 * value a token or a quoted string. An offer that does not parse, repeats
 * a parameter, has one we do not know or a value out of range is declined
 * (not failed): the connection then goes on without compression. The
 * compressor is zlib's, which cannot use a 256-byte window (raw deflate
 * with 8 window bits is refused), so a window of 8 bits for our own
 * compressor cannot be honoured: the server declines such an offer and
 * the client fails an answer that asks it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ws_internal.h"

enum { PMD_SNT = 1, PMD_CNT = 2, PMD_SBITS = 4, PMD_CBITS = 8 };

/* One extension of a list: its parameters as far as permessage-deflate
 * knows them. */
typedef struct offer {
    bool ours;            /* named permessage-deflate */
    bool bad;             /* a parameter it does not allow */
    int seen;             /* PMD_* */
    int sbits, cbits;     /* values, 0 where none was given */
} offer_t;

static const char *ows(const char *s)
{
    return s + strspn(s, " \t");
}

/* A parameter's value: a token or a quoted string without escapes, into
 * v (cap bytes). The end, or NULL. */
static const char *value(const char *s, char *v, size_t cap)
{
    size_t n;
    if (*s == '"') {
        n = strcspn(s + 1, "\"\\");
        if (s[1 + n] != '"' || n >= cap)
            return NULL;
        memcpy(v, s + 1, n);
        v[n] = '\0';
        return s + n + 2;
    }
    n = sp__http_token_span(s, cap - 1);
    if (!n)
        return NULL;
    memcpy(v, s, n);
    v[n] = '\0';
    return s + n;
}

/* Window bits "8" to "15", or 0. */
static int bits_of(const char *v)
{
    if (!strcmp(v, "8") || !strcmp(v, "9"))
        return v[0] - '0';
    if (v[0] == '1' && v[1] >= '0' && v[1] <= '5' && !v[2])
        return 10 + v[1] - '0';
    return 0;
}

/* A parameter of permessage-deflate into o (has_value: v holds one). */
static void param(offer_t *o, const char *name, size_t len, bool has_value, const char *v)
{
    static const char *const names[] = {"server_no_context_takeover",
                                        "client_no_context_takeover",
                                        "server_max_window_bits", "client_max_window_bits"};
    int i = 0;
    while (i < 4 && !(strlen(names[i]) == len && !strncasecmp(name, names[i], len)))
        i++;
    int bit = 1 << i;
    if (i == 4 || (o->seen & bit)) {
        o->bad = true; /* unknown or repeated */
        return;
    }
    o->seen |= bit;
    int b = has_value ? bits_of(v) : 0;
    if (i < 2)
        o->bad |= has_value;
    else if (i == 2)
        o->bad |= !b, o->sbits = b;
    else
        o->bad |= has_value && !b, o->cbits = b;
}

/* The extension at s into *o: the end of it (at a ',' or the NUL), or
 * NULL when it does not parse. */
static const char *extension(const char *s, offer_t *o)
{
    *o = (offer_t){0};
    s = ows(s);
    size_t n = sp__http_token_span(s, 64);
    if (!n)
        return NULL;
    o->ours = n == 18 && !strncasecmp(s, "permessage-deflate", n);
    for (s = ows(s + n); *s == ';'; s = ows(s)) {
        const char *name = ows(s + 1);
        size_t len = sp__http_token_span(name, 64);
        if (!len)
            return NULL;
        char v[16] = "";
        s = ows(name + len);
        bool has_value = *s == '=';
        if (has_value && !(s = value(ows(s + 1), v, sizeof v)))
            return NULL;
        param(o, name, len, has_value, v);
    }
    return *s == ',' || !*s ? s : NULL;
}

static int min_bits(int a, int b)
{
    return a < b ? a : b;
}

/* The server's answer to an offer, with our window limit `bits`. */
static bool answer(const offer_t *o, int bits, sp__ws_pmd_t *p, char *out)
{
    if (!o->ours || o->bad || o->sbits == 8)
        return false;
    p->server_no_takeover = o->seen & PMD_SNT;
    p->client_no_takeover = o->seen & PMD_CNT;
    p->server_bits = (uint8_t)min_bits(o->sbits ? o->sbits : 15, bits);
    /* The client's window may only be limited when it said it can be. */
    p->client_bits = (uint8_t)(o->seen & PMD_CBITS ? min_bits(o->cbits ? o->cbits : 15, bits)
                                                   : 15);
    int n = snprintf(out, SP__WS_PMD_TEXT, "permessage-deflate%s%s",
                     p->server_no_takeover ? "; server_no_context_takeover" : "",
                     p->client_no_takeover ? "; client_no_context_takeover" : "");
    if (p->server_bits < 15 || o->sbits)
        n += snprintf(out + n, SP__WS_PMD_TEXT - (size_t)n, "; server_max_window_bits=%d",
                      p->server_bits);
    if (o->seen & PMD_CBITS)
        snprintf(out + n, SP__WS_PMD_TEXT - (size_t)n, "; client_max_window_bits=%d",
                 p->client_bits);
    return true;
}

bool sp__ws_pmd_accept(const char *offers, int bits, sp__ws_pmd_t *p,
                       char out[SP__WS_PMD_TEXT])
{
    offer_t o;
    for (const char *s = offers; s && *s; s++) {
        if (!(s = extension(s, &o)))
            return false;
        if (answer(&o, bits, p, out))
            return true;
        if (!*s)
            break;
    }
    return false;
}

void sp__ws_pmd_offer(int bits, char out[SP__WS_PMD_TEXT])
{
    /* Limiting the server's window only when asked to: a server that
     * cannot must decline the whole offer. */
    if (bits >= 15)
        snprintf(out, SP__WS_PMD_TEXT, "permessage-deflate; client_max_window_bits");
    else
        snprintf(out, SP__WS_PMD_TEXT,
                 "permessage-deflate; server_max_window_bits=%d; client_max_window_bits=%d",
                 bits, bits);
}

int sp__ws_pmd_check(const char *ans, int bits, sp__ws_pmd_t *p)
{
    if (!ans)
        return 0;
    offer_t o;
    const char *end = extension(ans, &o);
    /* One extension, ours, every parameter within what we offered. */
    if (!end || *end || !o.ours || o.bad || (bits < 15 && !o.sbits) ||
        (o.sbits && o.sbits > (bits < 15 ? bits : 15)) || (o.seen & PMD_CBITS && !o.cbits) ||
        o.cbits > bits || o.cbits == 8)
        return -EPROTO;
    p->server_no_takeover = o.seen & PMD_SNT;
    p->client_no_takeover = o.seen & PMD_CNT;
    p->server_bits = (uint8_t)(o.sbits ? o.sbits : 15);
    p->client_bits = (uint8_t)(o.cbits ? o.cbits : bits);
    return 1;
}

void sp__ws_deflate_opts(sp_ws_opts_t *o)
{
    int b = o->deflate_window_bits;
    o->deflate_window_bits = !b ? SP_WS_DEFAULT_DEFLATE_WINDOW_BITS : b < 9 ? 9 : b > 15 ? 15 : b;
}

int sp__ws_pmd_request(sp_buf_t *b, const sp_ws_opts_t *o)
{
    if (!o->deflate)
        return 0;
    char offer[SP__WS_PMD_TEXT];
    sp__ws_pmd_offer(o->deflate_window_bits, offer);
    int rc = sp__buf_append(b, "Sec-WebSocket-Extensions: ", 26);
    rc |= sp__buf_append(b, offer, strlen(offer));
    return rc | sp__buf_append(b, "\r\n", 2);
}

int sp__ws_pmd_answer(const char *ans, const sp_ws_opts_t *o, sp__ws_z_t **z)
{
    *z = NULL;
    if (!o->deflate)
        return ans ? -EPROTO : 0; /* an extension we did not ask for */
    sp__ws_pmd_t p;
    int rc = sp__ws_pmd_check(ans, o->deflate_window_bits, &p);
    if (rc <= 0)
        return rc;
    *z = sp__ws_z_new(&p, true);
    return *z ? 0 : -ENOMEM;
}
