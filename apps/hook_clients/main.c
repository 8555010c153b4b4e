/* spindle-hook-clients: real client libraries, used through their
 * synchronous APIs by many fibers on ONE worker thread. With the hooks
 * (linked into libspindle, or LD_PRELOAD=libspindle_preload.so for the
 * -nohook build) the requests overlap: N requests take about as long as
 * one, not N times as long.
 *
 *   spindle-hook-clients --redis 127.0.0.1:6379 --http http://127.0.0.1:8000/ --fibers 200
 *
 * Without --http it starts its own local HTTP server that answers every
 * request after --delay-ms. Without --redis the hiredis demo is skipped,
 * without --mariadb the MariaDB one (built only where libmariadb is). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: spindle-hook-clients [--redis HOST:PORT] [--mariadb HOST:PORT]\n"
            "                            [--http URL | --no-http] [--fibers N] [--delay-ms MS]\n"
            "  --redis HOST:PORT  hiredis demo: each fiber connects and runs BLPOP on a key\n"
            "                     of its own that nobody pushes to, with a timeout of\n"
            "                     --delay-ms (skipped when not given)\n"
#ifdef HC_HAVE_MARIADB
            "  --mariadb HOST:PORT\n"
            "                     MariaDB demo: each fiber connects over TCP as root\n"
            "                     without a password (a server run with\n"
            "                     --skip-grant-tables) and runs SELECT SLEEP of\n"
            "                     --delay-ms (skipped when not given)\n"
#endif
            "  --http URL         libcurl demo: each fiber GETs URL and wants HTTP 200\n"
            "                     (default: a built-in server on 127.0.0.1 that answers\n"
            "                     after --delay-ms, one thread per connection)\n"
            "  --no-http          skip the libcurl demo\n"
            "  --fibers N         fibers per demo, all on one worker (default 200)\n"
            "  --delay-ms MS      server-side time of one request (default 100)\n");
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

/* HOST:PORT, HOST may be [v6]. */
static bool parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !parse_int(colon + 1, 1, 65535, port))
        return false;
    const char *h = s;
    size_t n = (size_t)(colon - s);
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0 || n >= hostlen)
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    return true;
}

/* One request alone, then `fibers` at once; print both. */
static bool report(const char *what, int fibers, const hc_result_t *one,
                   const hc_result_t *many)
{
    if (one->ok != 1) {
        printf("%-8s 1 request failed: %s\n", what, one->error);
        return false;
    }
    double single = hc_ms(one->wall_ns);
    printf("%-8s 1 request: %.1f ms\n", what, single);
    printf("%-8s %d fibers on one worker: %.1f ms wall (serial: ~%.0f ms), "
           "%d/%d ok, requests took %.1f .. %.1f ms\n",
           what, fibers, hc_ms(many->wall_ns), single * fibers, many->ok,
           many->fibers, hc_ms(many->min_ns), hc_ms(many->max_ns));
    if (many->error[0])
        printf("%-8s first failure: %s\n", what, many->error);
    return many->ok == fibers;
}

typedef struct options {
    const char *redis, *mariadb, *url;
    bool http;
    int fibers, delay_ms;
} options_t;

/* -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, options_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--redis") && has_value)
            o->redis = argv[++i];
#ifdef HC_HAVE_MARIADB
        else if (!strcmp(a, "--mariadb") && has_value)
            o->mariadb = argv[++i];
#endif
        else if (!strcmp(a, "--http") && has_value)
            o->url = argv[++i];
        else if (!strcmp(a, "--no-http"))
            o->http = false;
        else if (!strcmp(a, "--fibers") && has_value) {
            if (!parse_int(argv[++i], 1, 100000, &o->fibers)) {
                fprintf(stderr, "--fibers: want 1 .. 100000\n");
                return 2;
            }
        } else if (!strcmp(a, "--delay-ms") && has_value) {
            if (!parse_int(argv[++i], 1, 60000, &o->delay_ms)) {
                fprintf(stderr, "--delay-ms: want 1 .. 60000\n");
                return 2;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    return -1;
}

static void hostport_run(bool redis, const char *host, int port, int fibers,
                         int delay_ms, hc_result_t *out)
{
    if (redis)
        hc_redis_run(host, port, fibers, delay_ms, out);
#ifdef HC_HAVE_MARIADB
    else
        hc_mariadb_run(host, port, fibers, delay_ms, NULL, out);
#endif
}

/* The demo of a client that takes HOST:PORT (hiredis, MariaDB): 0 when all
 * requests worked, 1 when not, 2 for a bad address. */
static int hostport_demo(const char *what, const char *opt, const char *addr,
                         const options_t *o, bool *hooked)
{
    char host[256];
    int port;
    if (!parse_hostport(addr, host, sizeof host, &port)) {
        fprintf(stderr, "%s: want HOST:PORT, got '%s'\n", opt, addr);
        return 2;
    }
    hc_result_t one = {0}, many = {0};
    bool redis = !strcmp(opt, "--redis");
    hostport_run(redis, host, port, 1, o->delay_ms, &one);
    if (one.ok == 1)
        hostport_run(redis, host, port, o->fibers, o->delay_ms, &many);
    *hooked = one.hooked;
    return report(what, o->fibers, &one, &many) ? 0 : 1;
}

/* The libcurl demo, against o->url or a server of its own: 0 when all
 * requests worked, 1 when not. */
static int http_demo(const options_t *o, bool *hooked)
{
    hc_http_server_t *srv = NULL;
    char own[64];
    const char *url = o->url;
    if (!url) {
        srv = hc_http_server_start(o->delay_ms);
        if (!srv) {
            perror("starting the local HTTP server");
            return 1;
        }
        snprintf(own, sizeof own, "http://127.0.0.1:%d/", hc_http_server_port(srv));
        url = own;
        printf("libcurl  local server at %s answers after %d ms\n", url, o->delay_ms);
    }
    hc_result_t one = {0}, many = {0};
    hc_curl_run(url, 1, &one);
    if (one.ok == 1)
        hc_curl_run(url, o->fibers, &many);
    *hooked = one.hooked;
    bool ok = report("libcurl", o->fibers, &one, &many);
    if (srv) {
        unsigned long served;
        int peak;
        hc_http_server_counts(srv, &served, &peak);
        printf("libcurl  local server: %lu responses, up to %d connections at once\n",
               served, peak);
        hc_http_server_stop(srv);
    }
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    options_t o = {.http = true, .fibers = 200, .delay_ms = 100};
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (!o.redis && !o.mariadb && !o.http) {
        fprintf(stderr, "nothing to do: give --redis or --mariadb, or leave out --no-http\n");
        return 0;
    }
    bool hooked = true;
    int failed = 0;
    if (o.redis && (rc = hostport_demo("hiredis", "--redis", o.redis, &o, &hooked)) != 0) {
        if (rc == 2)
            return 2;
        failed = 1;
    }
    if (o.mariadb &&
        (rc = hostport_demo("mariadb", "--mariadb", o.mariadb, &o, &hooked)) != 0) {
        if (rc == 2)
            return 2;
        failed = 1;
    }
    if (o.http && http_demo(&o, &hooked) != 0)
        failed = 1;
    if (!failed && !hooked)
        printf("note: no spindle hooks in this process, so the requests ran one "
               "after another (run the -nohook build with "
               "LD_PRELOAD=libspindle_preload.so)\n");
    return failed;
}
