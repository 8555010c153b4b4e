/* spindle-echo-load: a load generator for echo servers, written on spindle.
 *
 *   spindle-echo-load --connect 127.0.0.1:9000 [--conns 100] [--size 64]
 *                     [--duration 5] [--workers 1] [--ws PATH [--ws-deflate]]
 *
 * Every connection is a fiber doing ping-pong: write a message, read it
 * back, check it, record the round trip. With --ws the connections are
 * WebSocket ones to ws://ADDR/PATH and each message a binary frame
 * (spindle-httpd --ws-echo PATH answers them); --ws-deflate offers
 * permessage-deflate. Prints messages/s and the p50 and
 * p99 round-trip latency in microseconds. Exits non-zero if any connection
 * failed or any byte came back wrong.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/timer.h>
#include <spindle/websocket.h>

/* Log-linear latency histogram: 16 sub-buckets per power of two of ns. */
enum { SUB_BITS = 4, SUB = 1 << SUB_BITS, BUCKETS = 64 * SUB };

typedef struct histogram {
    uint64_t count[BUCKETS];
} histogram_t;

static int msb_of(uint64_t v)
{
    int m = 0;
    while (v >>= 1)
        m++;
    return m;
}

static int bucket_of(uint64_t ns)
{
    if (ns < SUB)
        return (int)ns;
    int msb = msb_of(ns);
    return (msb - SUB_BITS + 1) * SUB + (int)((ns >> (msb - SUB_BITS)) & (SUB - 1));
}

static uint64_t bucket_low(int b)
{
    if (b < SUB)
        return (uint64_t)b;
    int msb = b / SUB + SUB_BITS - 1;
    return ((uint64_t)SUB + (uint64_t)(b % SUB)) << (msb - SUB_BITS);
}

static uint64_t percentile(const histogram_t *h, double p)
{
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < BUCKETS; i++)
        total += h->count[i];
    uint64_t want = (uint64_t)((double)total * p);
    for (int i = 0; i < BUCKETS; i++) {
        seen += h->count[i];
        if (seen > want)
            return bucket_low(i);
    }
    return 0;
}

typedef struct load {
    sp_addr_t addr;
    const char *ws_url; /* NULL: plain TCP */
    sp_ws_opts_t ws_opts;
    size_t size;
    uint64_t end_ns;
    histogram_t *per_worker; /* fibers never leave their worker */
    _Atomic uint64_t messages;
    _Atomic int failed;
} load_t;

/* One round trip of msg on a plain socket or a WebSocket: 0 or -1. */
static int round_trip(int fd, sp_ws_t *ws, const char *out, char *in, size_t size)
{
    if (!ws)
        return sp_write_full(fd, out, size) < 0 ||
                       sp_read_full(fd, in, size) != (ssize_t)size ||
                       memcmp(in, out, size) != 0
                   ? -1
                   : 0;
    sp_ws_msg_t m;
    return sp_ws_send(ws, SP_WS_BINARY, out, size) < 0 || sp_ws_recv(ws, &m, -1) < 0 ||
                   m.len != size || memcmp(m.data, out, size) != 0
               ? -1
               : 0;
}

static void connection(void *arg)
{
    load_t *L = arg;
    histogram_t *h = &L->per_worker[sp_worker_index()];
    char *out = malloc(L->size), *in = malloc(L->size);
    sp_ws_t *ws = NULL;
    int fd = L->ws_url ? (sp_ws_connect(L->ws_url, &L->ws_opts, &ws) < 0 ? -1 : 0)
                       : sp_connect(&L->addr, 5000000);
    if (fd < 0 || !out || !in) {
        atomic_fetch_add(&L->failed, 1);
        goto done;
    }
    if (!ws)
        sp_set_nodelay(fd, true);
    for (size_t i = 0; i < L->size; i++)
        out[i] = (char)('a' + (i + (size_t)fd) % 26);
    uint64_t n = 0;
    for (uint64_t now = sp_now_ns(); now < L->end_ns;) {
        if (round_trip(fd, ws, out, in, L->size) < 0) {
            atomic_fetch_add(&L->failed, 1);
            break;
        }
        uint64_t after = sp_now_ns();
        h->count[bucket_of(after - now)]++;
        now = after;
        n++;
    }
    atomic_fetch_add(&L->messages, n);
    if (ws)
        sp_ws_close(ws, SP_WS_NORMAL, NULL);
    else
        close(fd);
done:
    sp_ws_free(ws);
    free(out);
    free(in);
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s --connect ADDR [--conns N] [--size BYTES] "
                    "[--duration SECONDS] [--workers N] [--ws PATH [--ws-deflate]]\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    static load_t L;
    const char *target = NULL, *ws_path = NULL;
    int conns = 100, workers = 1;
    double duration = 5;
    long size = 64;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--connect") && i + 1 < argc)
            target = argv[++i];
        else if (!strcmp(argv[i], "--conns") && i + 1 < argc)
            conns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = atol(argv[++i]);
        else if (!strcmp(argv[i], "--duration") && i + 1 < argc)
            duration = atof(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            workers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ws") && i + 1 < argc)
            ws_path = argv[++i];
        else if (!strcmp(argv[i], "--ws-deflate"))
            L.ws_opts.deflate = true;
        else
            usage(argv[0]);
    }
    if (!target || conns < 1 || size < 1 || duration <= 0 || workers < 1)
        usage(argv[0]);
    signal(SIGPIPE, SIG_IGN);
    if (sp_addr_resolve(target, &L.addr, 1) < 1) {
        fprintf(stderr, "spindle-echo-load: bad address '%s'\n", target);
        return 2;
    }
    L.size = (size_t)size;
    static char url[512];
    if (ws_path) {
        snprintf(url, sizeof url, "ws://%s%s%s", target, *ws_path == '/' ? "" : "/", ws_path);
        L.ws_url = url;
    }
    L.per_worker = calloc((size_t)workers, sizeof *L.per_worker);
    sp_iomanager_t *io = sp_iomanager_create("load", workers, false);
    if (!io || !L.per_worker || sp_iomanager_start(io) < 0) {
        perror("spindle-echo-load");
        return 1;
    }
    uint64_t start = sp_now_ns();
    L.end_ns = start + (uint64_t)(duration * 1e9);
    for (int i = 0; i < conns; i++)
        sp_schedule(sp_iomanager_scheduler(io), connection, &L, SP_ANY_WORKER);
    sp_iomanager_stop(io);
    double secs = (double)(sp_now_ns() - start) / 1e9;
    histogram_t all = {{0}};
    for (int w = 0; w < workers; w++)
        for (int b = 0; b < BUCKETS; b++)
            all.count[b] += L.per_worker[w].count[b];
    uint64_t msgs = atomic_load(&L.messages);
    printf("messages %llu\nmessages/s %.0f\np50_us %.1f\np99_us %.1f\nfailed_connections %d\n",
           (unsigned long long)msgs, (double)msgs / secs,
           (double)percentile(&all, 0.50) / 1000, (double)percentile(&all, 0.99) / 1000,
           atomic_load(&L.failed));
    sp_iomanager_destroy(io);
    free(L.per_worker);
    return atomic_load(&L.failed) ? 1 : 0;
}
