/* spindle-tls-bench CERT KEY MODE ...: the TLS layer's costs, with the
 * server in this process and the clients in a forked child (each with its
 * own IOManager of one worker), so the figures of one side are not mixed
 * with the other's.
 *   handshakes SECONDS CONC  CONC client fibers open TLS connections
 *                            (full handshakes, TLS 1.3, ECDHE P-256/X25519)
 *                            and close them, for SECONDS; prints
 *                            handshakes=N per_s=R and the server's CPU
 *                            seconds per 1,000 handshakes.
 *   idle N [plain]           N connections stay open and idle after one
 *                            16-byte echo each; prints the server's VmRSS
 *                            before and after and the delta per
 *                            connection (also after malloc_trim: what
 *                            the handshakes' garbage left in the heap
 *                            goes), and the heap in use per connection
 *                            (mallinfo2). `plain`: the same over TCP only
 *                            (the fiber and socket share of the figures).
 *   stall N [hello]          N raw TCP clients connect and send nothing
 *                            (hello: the first 12 bytes of a ClientHello)
 *                            while the server's handshakes wait; prints
 *                            the heap in use and the VmRSS per connection.
 * CERT and KEY: PEM files of an EC P-256 certificate for "bench.test". */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>
#include <spindle/timer.h>
#include <spindle/tls.h>

static sp_tls_config_t *server_cfg, *client_cfg;
static bool plain; /* idle: TCP only */
static bool hello; /* stall: send the start of a ClientHello */
static sp_addr_t addr;
static atomic_long handshakes, failures;
static atomic_int open_conns, served;
static uint64_t until_ns;
static int seconds; /* handshakes: how long the clients run */

static void serve(int fd, const sp_addr_t *peer, void *arg)
{
    (void)peer;
    (void)arg;
    char buf[64];
    atomic_fetch_add(&served, 1);
    if (plain) {
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            sp_write_full(fd, buf, (size_t)n);
        return;
    }
    sp_tls_conn_t *c;
    if (sp_tls_accept(server_cfg, fd, 0, &c) < 0)
        return;
    ssize_t n;
    while ((n = sp_tls_read(c, buf, sizeof buf, -1)) > 0)
        sp_tls_write(c, buf, (size_t)n, -1);
    sp_tls_free(c);
}

/* Client side: one connection, optionally held open (idle mode). */
static int one(bool hold)
{
    int fd = sp_connect(&addr, 5000000);
    if (fd < 0)
        return fd;
    sp_tls_conn_t *c = NULL;
    char msg[16] = "0123456789abcde", back[16];
    int rc = plain ? 0 : sp_tls_connect(client_cfg, fd, "bench.test", 0, &c);
    if (rc == 0 && hold) {
        rc = plain ? (int)sp_write_full(fd, msg, 16) : (int)sp_tls_write(c, msg, 16, -1);
        rc = rc != 16                ? -EIO
             : plain                 ? (sp_read_full(fd, back, 16) == 16 ? 0 : -EIO)
             : sp_tls_read(c, back, 16, -1) > 0 ? 0 : -EIO;
        atomic_fetch_add(&open_conns, 1);
        /* Idle until the parent's server stops and shuts the socket. */
        if (plain)
            while (read(fd, back, sizeof back) > 0)
                ;
        else
            while (sp_tls_read(c, back, sizeof back, -1) > 0)
                ;
    }
    sp_tls_free(c);
    close(fd);
    return rc;
}

static void hammer(void *arg)
{
    (void)arg;
    while (sp_now_ns() < until_ns)
        atomic_fetch_add(one(false) == 0 ? &handshakes : &failures, 1);
}

static void hold(void *arg)
{
    (void)arg;
    if (one(true) < 0)
        atomic_fetch_add(&failures, 1);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* The child: `n` client fibers running fn; writes a line to `report`
 * when all are open (idle) or done (handshakes). */
static int clients(sp_fiber_fn fn, int n, int report, bool idle)
{
    client_cfg = sp_tls_client_config(&(sp_tls_client_opts_t){.insecure = true});
    sp_iomanager_t *io = sp_iomanager_create("clients", 1, false);
    if (!client_cfg || !io || sp_iomanager_start(io) < 0)
        return 1;
    for (int i = 0; i < n; i++)
        sp_schedule(sp_iomanager_scheduler(io), fn, NULL, SP_ANY_WORKER);
    if (!idle) /* the fibers end at until_ns */
        sp_iomanager_stop(io);
    while (idle && atomic_load(&open_conns) + atomic_load(&failures) < n)
        usleep(10000);
    dprintf(report, "%ld %ld\n", idle ? (long)atomic_load(&open_conns) : atomic_load(&handshakes),
            atomic_load(&failures));
    if (idle) /* returns when the parent's server ends the connections */
        sp_iomanager_stop(io);
    sp_iomanager_destroy(io);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: spindle-tls-bench CERT KEY handshakes SECONDS CONC\n"
                    "       spindle-tls-bench CERT KEY idle N [plain]\n"
                    "       spindle-tls-bench CERT KEY stall N [hello]\n");
    return 2;
}

enum mode { HANDSHAKES, IDLE, STALL };

/* stall: n plain sockets from this (fiberless) thread, kept open until
 * the parent closes `from`. */
static int stallers(int n, int from, int to)
{
    static const unsigned char start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01,
                                          0x00, 0x01, 0xfc, 0x03, 0x03, 0x5a};
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (const struct sockaddr *)&addr.ss, addr.len) < 0 ||
            (hello && send(fd, start, sizeof start, 0) != (ssize_t)sizeof start))
            failed++;
    }
    dprintf(to, "%d %d\n", n - failed, failed);
    char x;
    while (read(from, &x, 1) > 0)
        ;
    return 0;
}

/* The child: gets the server's address from `from`, reports on `to`. */
static int child(enum mode m, int n, int from, int to)
{
    if (read(from, &addr, sizeof addr) != (ssize_t)sizeof addr)
        return 1;
    if (m == STALL)
        return stallers(n, from, to);
    until_ns = sp_now_ns() + (uint64_t)seconds * 1000000000u;
    return clients(m == IDLE ? hold : hammer, n, to, m == IDLE);
}

/* stall: wait until the server has taken the n connections (and a
 * little more, for their handshakes to read what was sent and park). */
static void parked(int n)
{
    while (atomic_load(&served) < n)
        usleep(10000);
    usleep(200000);
}

static void report_memory(enum mode m, long done, long failed, long rss0, size_t heap0)
{
    long rss1 = rss_kib();
    double k = done ? 1.0 / (double)done : 0.0;
    double heap = (double)(mallinfo2().uordblks - heap0) / 1024.0 * k;
    if (m == STALL) {
        printf("stall-%s conns=%ld failed=%ld heap_per_conn_kib=%.2f rss_per_conn_kib=%.2f\n",
               hello ? "hello" : "silent", done, failed, heap, (double)(rss1 - rss0) * k);
        return;
    }
    malloc_trim(0);
    printf("%s idle=%ld failed=%ld rss_before_kib=%ld rss_after_kib=%ld per_conn_kib=%.2f "
           "trimmed_per_conn_kib=%.2f heap_per_conn_kib=%.2f\n",
           plain ? "tcp" : "tls", done, failed, rss0, rss1, (double)(rss1 - rss0) * k,
           (double)(rss_kib() - rss0) * k, heap);
}

static sp_tcp_server_t *server(sp_iomanager_t **io, const char *cert_file, const char *key_file)
{
    sp_tls_cert_t cert = {cert_file, key_file};
    server_cfg = sp_tls_server_config(&(sp_tls_server_opts_t){.certs = &cert, .ncerts = 1});
    *io = sp_iomanager_create("server", 1, false);
    sp_tcp_server_t *srv = *io ? sp_tcp_server_create(*io, serve, NULL, NULL) : NULL;
    sp_addr_parse("127.0.0.1:0", &addr);
    if (!server_cfg || !srv || sp_tcp_server_listen(srv, &addr) < 0 ||
        sp_iomanager_start(*io) < 0 || sp_tcp_server_start(srv) < 0 ||
        sp_tcp_server_addr(srv, 0, &addr) < 0) {
        fprintf(stderr, "server: %s %s\n", strerror(errno), sp_tls_error_reason());
        exit(1);
    }
    return srv;
}

int main(int argc, char **argv)
{
    if (argc < 5)
        return usage();
    enum mode m = strcmp(argv[3], "idle") == 0    ? IDLE
                  : strcmp(argv[3], "stall") == 0 ? STALL
                                                  : HANDSHAKES;
    if (m == HANDSHAKES && (strcmp(argv[3], "handshakes") != 0 || argc < 6))
        return usage();
    plain = m == IDLE && argc > 5 && strcmp(argv[5], "plain") == 0;
    hello = m == STALL && argc > 5 && strcmp(argv[5], "hello") == 0;
    int n = atoi(argv[m == HANDSHAKES ? 5 : 4]);
    seconds = m == HANDSHAKES ? atoi(argv[4]) : 0;
    signal(SIGPIPE, SIG_IGN);
    int up[2], down[2];
    if (pipe(up) < 0 || pipe(down) < 0)
        return 1;
    pid_t pid = fork(); /* before any thread: the child starts clean */
    if (pid == 0) {
        close(down[1]); /* so the parent's close is an EOF */
        close(up[0]);
        _exit(child(m, n, down[0], up[1]));
    }
    close(down[0]);
    close(up[1]);
    sp_iomanager_t *io;
    sp_tcp_server_t *srv = server(&io, argv[1], argv[2]);
    long rss0 = rss_kib();
    size_t heap0 = mallinfo2().uordblks;
    double cpu0 = cpu_s(), t0 = (double)sp_now_ns();
    if (write(down[1], &addr, sizeof addr) != (ssize_t)sizeof addr)
        return 1;
    long done = 0, failed = 0;
    FILE *r = fdopen(up[0], "r");
    if (!r || fscanf(r, "%ld %ld", &done, &failed) != 2)
        return 1;
    double wall = ((double)sp_now_ns() - t0) / 1e9, cpu = cpu_s() - cpu0;
    if (m == STALL)
        parked((int)done);
    if (m != HANDSHAKES)
        report_memory(m, done, failed, rss0, heap0);
    else
        printf("handshakes=%ld failed=%ld per_s=%.0f server_cpu_s_per_1000=%.3f\n", done,
               failed, (double)done / wall, done ? cpu * 1000.0 / (double)done : 0.0);
    close(down[1]);             /* stall: the child lets go */
    sp_tcp_server_stop(srv, 0); /* idle: the clients see their connections end */
    waitpid(pid, NULL, 0);
    sp_iomanager_stop(io);
    sp_tcp_server_destroy(srv);
    sp_iomanager_destroy(io);
    sp_tls_config_free(server_cfg);
    return failed != 0;
}
