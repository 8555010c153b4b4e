/* spindle-tls-load: TLS load against any HTTPS server (spindle's or a
 * peer's), for bench/https_peers.sh. Fibers of one worker are the
 * clients; certificates are not verified (a benchmark, not a client).
 *
 *   spindle-tls-load HOST:PORT handshakes SECONDS CONC
 *       CONC fibers each loop: connect, full TLS 1.3 handshake (no
 *       resumption), GET /plaintext with Connection: close, read the whole
 *       answer, close. Prints "handshakes N failures F per_s R".
 *   spindle-tls-load HOST:PORT idle N
 *       N connections each make one kept-alive GET /plaintext and then
 *       stay open and idle; prints "open N failures F" once all are, then
 *       holds them until its standard input ends.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/timer.h>
#include <spindle/tls.h>

static sp_tls_config_t *cfg;
static sp_addr_t addr;
static uint64_t until_ns;
static atomic_long done, failures;

/* One GET /plaintext over a new TLS connection; the connection is left
 * in *out (kept alive) or closed. 0 or a negative errno. */
static int exchange(bool keep, int *fd_out, sp_tls_conn_t **out)
{
    int fd = sp_connect(&addr, 5000000);
    if (fd < 0)
        return fd;
    sp_tls_conn_t *c = NULL;
    int rc = sp_tls_connect(cfg, fd, NULL, 5000000, &c);
    const char *rq = keep ? "GET /plaintext HTTP/1.1\r\nHost: bench\r\n\r\n"
                          : "GET /plaintext HTTP/1.1\r\nHost: bench\r\n"
                            "Connection: close\r\n\r\n";
    if (rc == 0 && sp_tls_write(c, rq, strlen(rq), 5000000) < 0)
        rc = -EIO;
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    /* The answer is small: keep-alive reads until its body's end (the
     * "Hello, World!" of every /plaintext), close reads until EOF. */
    while (rc == 0 && (n = sp_tls_read(c, buf + got, sizeof buf - 1 - got, 5000000)) > 0) {
        got += (size_t)n;
        buf[got] = 0;
        if (keep && strstr(buf, "Hello, World!"))
            break;
        if (got == sizeof buf - 1)
            got = 0;
    }
    if (rc == 0 && !strstr(buf, "Hello, World!"))
        rc = -EPROTO;
    if (rc == 0 && keep) {
        *fd_out = fd;
        *out = c;
        return 0;
    }
    sp_tls_free(c);
    close(fd);
    return rc;
}

static void hammer(void *arg)
{
    (void)arg;
    while (sp_now_ns() < until_ns) {
        int fd;
        sp_tls_conn_t *c;
        atomic_fetch_add(exchange(false, &fd, &c) == 0 ? &done : &failures, 1);
    }
}

static void hold(void *arg)
{
    (void)arg;
    int fd;
    sp_tls_conn_t *c;
    if (exchange(true, &fd, &c) < 0) {
        atomic_fetch_add(&failures, 1);
        return;
    }
    atomic_fetch_add(&done, 1);
    char x[64];
    while (sp_tls_read(c, x, sizeof x, -1) > 0) /* until the server or exit ends it */
        ;
    sp_tls_free(c);
    close(fd);
}

static int usage(void)
{
    fprintf(stderr, "usage: spindle-tls-load HOST:PORT handshakes SECONDS CONC\n"
                    "       spindle-tls-load HOST:PORT idle N\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 4 || sp_addr_parse(argv[1], &addr) < 0)
        return usage();
    bool idle = strcmp(argv[2], "idle") == 0;
    if (!idle && (strcmp(argv[2], "handshakes") != 0 || argc < 5))
        return usage();
    int n = atoi(argv[idle ? 3 : 4]);
    int seconds = idle ? 0 : atoi(argv[3]);
    if (n <= 0 || (!idle && seconds <= 0))
        return usage();
    cfg = sp_tls_client_config(&(sp_tls_client_opts_t){.insecure = true});
    sp_iomanager_t *io = sp_iomanager_create("tls-load", 1, false);
    if (!cfg || !io || sp_iomanager_start(io) < 0)
        return 1;
    uint64_t t0 = sp_now_ns();
    until_ns = t0 + (uint64_t)seconds * 1000000000u;
    for (int i = 0; i < n; i++)
        sp_schedule(sp_iomanager_scheduler(io), idle ? hold : hammer, NULL, SP_ANY_WORKER);
    if (idle) {
        while (atomic_load(&done) + atomic_load(&failures) < n)
            usleep(10000);
        printf("open %ld failures %ld\n", atomic_load(&done), atomic_load(&failures));
        fflush(stdout);
        char x;
        while (read(0, &x, 1) > 0)
            ;
        _exit(0); /* the held connections end with the process */
    }
    sp_iomanager_stop(io);
    double secs = (double)(sp_now_ns() - t0) / 1e9;
    printf("handshakes %ld failures %ld per_s %.0f\n", atomic_load(&done),
           atomic_load(&failures), (double)atomic_load(&done) / secs);
    sp_iomanager_destroy(io);
    sp_tls_config_free(cfg);
    return 0;
}
