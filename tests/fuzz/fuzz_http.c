/* libFuzzer target: bytes from a client, through the request parser as the
 * connection loop feeds it (a request, then the rest for the next one),
 * with every accessor read back. The first byte chooses how the input is
 * split into reads, so tokens split across reads are exercised too.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DSPINDLE_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_http
 *   build-fuzz/bin/fuzz_http tests/fuzz/http -max_total_time=60
 */
#include <stdint.h>
#include <string.h>

#include "http_internal.h"

static const sp_http_server_opts_t opts = {
    .max_request_line = SP_HTTP_DEFAULT_MAX_REQUEST_LINE,
    .max_header_size = SP_HTTP_DEFAULT_MAX_HEADER_SIZE,
    .max_headers = SP_HTTP_DEFAULT_MAX_HEADERS,
    .max_body = 64 * 1024, /* small: reach 413 often */
};

/* Touch every string the handler could see; returns a checksum so the
 * reads are not optimised away. */
static size_t read_back(sp_http_request_t *r)
{
    size_t sum = strlen(sp_http_request_target(r)) + strlen(sp_http_request_path(r)) +
                 strlen(sp_http_request_query(r)) + strlen(sp_http_request_method_name(r));
    const char *name, *value;
    for (size_t i = 0; sp_http_request_header_at(r, i, &name, &value) == 0; i++)
        sum += strlen(name) + strlen(value);
    for (size_t i = 0; sp_http_request_param_at(r, i, &name, &value) == 0; i++)
        sum += strlen(name) + strlen(value);
    size_t blen;
    sp_http_request_body(r, &blen);
    if (sp_http_request_header(r, "host"))
        sum++;
    return sum + blen;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] % 64 + 1; /* bytes per "read" */
    const char *p = (const char *)data + 1;
    size_t left = size - 1, avail = 0;
    sp_http_request_t r;
    sp__http_req_init(&r, &opts);
    volatile size_t sink = 0;
    while (left) {
        /* Like the connection's buffer: what was not used stays, more comes. */
        avail = avail + piece < left ? avail + piece : left;
        sp__http_state_t st;
        size_t used = sp__http_req_feed(&r, p, avail, &st);
        if (st == SP__HTTP_FAILED || (st == SP__HTTP_MORE && used == 0 && avail == left))
            break;
        p += used;
        left -= used;
        avail -= used;
        if (st == SP__HTTP_DONE) {
            sink += read_back(&r);
            if (!r.keep_alive || r.upgrade)
                break; /* the connection would close here */
            sp__http_req_reset(&r);
        }
    }
    sp__http_req_free(&r);
    (void)sink;
    return 0;
}
