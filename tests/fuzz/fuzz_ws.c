/* libFuzzer target: WebSocket frames through the receiver (ws_frame.c) as
 * sp_ws_recv feeds it (what it did not take stays buffered, more is
 * appended), once whole and then in reads of 1, 2, 3, 7 and 64 bytes. Each
 * run yields what the connection would see (a fingerprint of every whole
 * message and control frame, a close payload's verdict, the close code
 * of a violation) and must yield the same whatever the split; a message
 * over the limit or a crash is a finding too. The first byte chooses the
 * side (bit 0: frames from a client, masked) and whether permessage-deflate
 * was negotiated (bit 1; bit 2: the peer compresses each message alone,
 * bits 3-5: its window, 8 + their value), so compressed
 * messages (RSV1) are inflated, held to the limit and checked as text as
 * they inflate; the rest are frames.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DSPINDLE_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_ws
 *   build-fuzz/bin/fuzz_ws tests/fuzz/ws -max_total_time=60
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/ws_internal.h"

enum { MAX_MESSAGE = 4096, MAX_EVENTS = 64 };

typedef struct {
    uint64_t ev[MAX_EVENTS];
    int n;
} trace_t;

static void note(trace_t *t, uint64_t v)
{
    if (t->n < MAX_EVENTS)
        t->ev[t->n++] = v;
}

static uint64_t fingerprint(int event, int type, const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(event * 16 + type);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h ^ ((uint64_t)n << 48);
}

/* Feed what is buffered: false once the receiver refused the bytes. */
static bool drain(sp__ws_rx_t *rx, sp_buf_t *in, trace_t *t)
{
    for (;;) {
        int event;
        long k = sp__ws_rx_feed(rx, (const uint8_t *)sp_buf_data(in), sp_buf_len(in), &event);
        if (k < 0) {
            note(t, (uint64_t)-k); /* the close code */
            return false;
        }
        if (k == 0)
            return true;
        sp_buf_consume(in, (size_t)k);
        if (sp_buf_len(&rx->msg) > MAX_MESSAGE)
            abort();
        if (event == SP__WS_MESSAGE) {
            note(t, fingerprint(event, rx->msg_type, (const uint8_t *)sp_buf_data(&rx->msg),
                                sp_buf_len(&rx->msg)));
            sp__ws_rx_next(rx);
        } else if (event != SP__WS_NONE) {
            int code = 0;
            if (event == SP__WS_CLOSE)
                note(t, (uint64_t)sp__ws_close_payload(rx->ctl, rx->ctl_len, &code) << 16 |
                            (uint64_t)code);
            note(t, fingerprint(event, 0, rx->ctl, rx->ctl_len));
        }
    }
}

static trace_t run(uint8_t mode, const uint8_t *p, size_t n, size_t piece)
{
    trace_t t = {.n = 0};
    bool from_client = mode & 1;
    sp__ws_rx_t rx;
    sp__ws_rx_init(&rx, from_client, MAX_MESSAGE);
    if (mode & 2) {
        /* The peer's window as drawn; ours never under 9 bits (the
         * handshake does not agree to 8 for us). */
        uint8_t theirs = (uint8_t)(8 + (mode >> 3 & 7)), ours = theirs < 9 ? 9 : theirs;
        bool alone = mode & 4;
        sp__ws_pmd_t pmd = {alone, alone, from_client ? ours : theirs,
                            from_client ? theirs : ours};
        if (!(rx.z = sp__ws_z_new(&pmd, !from_client)))
            abort();
    }
    sp_buf_t in;
    sp_buf_init(&in);
    bool ok = true;
    for (size_t at = 0; ok && at < n; at += piece) {
        size_t k = n - at < piece ? n - at : piece;
        if (sp_buf_append(&in, p + at, k) < 0)
            abort();
        ok = drain(&rx, &in, &t);
    }
    note(&t, ok ? 7 : 8); /* still open, or refused */
    sp_buf_free(&in);
    sp__ws_rx_free(&rx);
    sp__ws_z_free(rx.z);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    trace_t whole = run(data[0], p, n, n ? n : 1);
    static const size_t pieces[] = {1, 2, 3, 7, 64};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        trace_t t = run(data[0], p, n, pieces[i]);
        if (t.n != whole.n || memcmp(t.ev, whole.ev, sizeof(uint64_t) * (size_t)t.n)) {
            fprintf(stderr, "fuzz_ws: reads of %zu differ from the whole input\n", pieces[i]);
            abort();
        }
    }
    return 0;
}
