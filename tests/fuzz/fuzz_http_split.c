/* libFuzzer target: the same bytes must get the same answers however TCP
 * splits them. The input is fed as the connection loop feeds it (what the
 * parser did not use stays buffered, more is appended) once whole and then
 * in reads of 1, 2, 3, 5, 8 and 13 bytes and in random sizes; each run
 * yields the sequence of what the server would answer (a fingerprint of
 * every complete request, the status of a refused one, and whether a
 * request was left unfinished). The whole input is also fed to http-parser
 * alone, without the common head's fast path (http_fast_head.c). Any
 * difference aborts with both sequences.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DSPINDLE_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_http_split
 *   build-fuzz/bin/fuzz_http_split tests/fuzz/http -max_total_time=60
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

static const sp_http_server_opts_t opts = {
    .max_request_line = 256, /* small limits: reach 414, 431 and 413 often */
    .max_header_size = 1024,
    .max_headers = 16,
    .max_body = 512,
};

enum { MAX_EVENTS = 64 };
/* One answer: a request's fingerprint, or a refusal's status (< 1000). */
typedef struct {
    uint64_t ev[MAX_EVENTS];
    size_t n;
} answers_t;
enum { UNFINISHED = 1 }; /* a request was begun but not complete at the end */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s, strlen(s) + 1);
}

/* Everything a handler could see, and what decides the connection's fate. */
static uint64_t fingerprint(const sp_http_request_t *r)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv_str(h, sp_http_request_method_name(r));
    h = fnv_str(h, sp_http_request_target(r));
    h = fnv_str(fnv_str(h, sp_http_request_path(r)), sp_http_request_query(r));
    const char *name, *value;
    for (size_t i = 0; sp_http_request_header_at(r, i, &name, &value) == 0; i++)
        h = fnv_str(fnv_str(h, name), value);
    size_t blen;
    const void *body = sp_http_request_body(r, &blen);
    h = fnv(h, body, blen);
    int flags[] = {sp_http_request_version(r), r->keep_alive, r->upgrade,
                   r->expect_continue};
    h = fnv(h, flags, sizeof flags);
    return h < 1000 ? h + 1000 : h; /* never mistaken for a status */
}

/* Bytes per read: whole (0), a fixed size, or random from a seed. */
typedef struct {
    size_t fixed;
    uint64_t seed;
} split_t;

static size_t next_piece(split_t *s, size_t left)
{
    if (s->fixed)
        return s->fixed;
    if (!s->seed)
        return left;
    s->seed = s->seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (size_t)(s->seed >> 33) % 17 + 1;
}

static void record(answers_t *a, uint64_t ev)
{
    if (a->n < MAX_EVENTS)
        a->ev[a->n++] = ev;
}

typedef size_t feed_fn(sp_http_request_t *, const char *, size_t, sp__http_state_t *);

static void answers_of(const uint8_t *data, size_t size, split_t split, feed_fn *feed,
                       answers_t *a)
{
    a->n = 0;
    sp_http_request_t r;
    sp__http_req_init(&r, &opts);
    const char *p = (const char *)data;
    size_t avail = 0, left = size;
    for (;;) {
        if (avail == left) { /* the client sent everything */
            if (r.begun || avail)
                record(a, UNFINISHED);
            break;
        }
        size_t piece = next_piece(&split, left - avail);
        avail = avail + piece < left ? avail + piece : left;
        sp__http_state_t st = SP__HTTP_DONE;
        while (avail && st == SP__HTTP_DONE) {
            size_t used = feed(&r, p, avail, &st);
            p += used;
            left -= used;
            avail -= used;
            if (st == SP__HTTP_FAILED) {
                record(a, (uint64_t)r.error);
                goto out;
            }
            if (st == SP__HTTP_DONE) {
                record(a, fingerprint(&r));
                if (!r.keep_alive || r.upgrade)
                    goto out; /* the connection would close here */
                sp__http_req_reset(&r);
            }
        }
    }
out:
    sp__http_req_free(&r);
}

static void print_answers(const char *what, const answers_t *a)
{
    fprintf(stderr, "%s:", what);
    for (size_t i = 0; i < a->n; i++)
        fprintf(stderr, a->ev[i] < 1000 ? " %llu" : " req:%016llx",
                (unsigned long long)a->ev[i]);
    fprintf(stderr, "\n");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    static const size_t sizes[] = {1, 2, 3, 5, 8, 13};
    answers_t whole, split;
    answers_of(data, size, (split_t){0, 0}, sp__http_req_feed, &whole);
    /* http-parser alone must answer as the feed with its fast path does. */
    answers_of(data, size, (split_t){0, 0}, sp__http_req_parse, &split);
    if (split.n != whole.n || memcmp(split.ev, whole.ev, whole.n * sizeof whole.ev[0])) {
        print_answers("whole", &whole);
        print_answers("http-parser alone", &split);
        abort();
    }
    for (size_t i = 0; i <= sizeof sizes / sizeof sizes[0]; i++) {
        bool random = i == sizeof sizes / sizeof sizes[0];
        split_t s = {random ? 0 : sizes[i], fnv(1, data, size) | 1};
        answers_of(data, size, s, sp__http_req_feed, &split);
        if (split.n != whole.n || memcmp(split.ev, whole.ev, whole.n * sizeof whole.ev[0])) {
            char what[64];
            if (random)
                snprintf(what, sizeof what, "reads of random sizes");
            else
                snprintf(what, sizeof what, "reads of %zu bytes", sizes[i]);
            print_answers("whole", &whole);
            print_answers(what, &split);
            abort();
        }
    }
    return 0;
}
