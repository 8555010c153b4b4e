/* spindle-http-burst HOST PORT CONNS [TIMEOUT_S]: opens CONNS connections
 * at once, sends one GET /plaintext on each as soon as it is connected,
 * and times each first answer (from the request's write to the first bytes
 * of the response). What a server pays for a burst of new connections: the
 * accept, a new connection's state, its first request. Prints one line:
 *   conns=N ok=N all_ms=T p50_ms= p90_ms= p99_ms= max_ms=
 * all_ms is from the first connect to the last answer. Exit 1 if any
 * connection failed or timed out. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CONNECTING, SENT, ANSWERED, FAILED };

typedef struct conn {
    int fd;
    int state;
    double sent_ms, latency_ms;
} conn_t;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void watch(int ep, int op, conn_t *c, uint32_t events)
{
    struct epoll_event e = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, op, c->fd, &e) < 0) {
        perror("epoll_ctl");
        exit(2);
    }
}

static void fail(int ep, conn_t *c, int *done)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    c->state = FAILED;
    (*done)++;
}

/* The connection is writable (connected): send the request. */
static void on_connected(int ep, conn_t *c, int *done)
{
    static const char req[] = "GET /plaintext HTTP/1.1\r\nHost: bench\r\n\r\n";
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err || send(c->fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        fail(ep, c, done);
        return;
    }
    c->sent_ms = now_ms();
    c->state = SENT;
    watch(ep, EPOLL_CTL_MOD, c, EPOLLIN);
}

static void on_answer(int ep, conn_t *c, int *done)
{
    char buf[4096];
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n < 8 || memcmp(buf, "HTTP/1.", 7) != 0) {
        fail(ep, c, done);
        return;
    }
    c->latency_ms = now_ms() - c->sent_ms;
    c->state = ANSWERED;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    (*done)++;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s HOST PORT CONNS [TIMEOUT_S]\n", argv[0]);
        return 2;
    }
    int n = atoi(argv[3]);
    int timeout_ms = argc > 4 ? atoi(argv[4]) * 1000 : 10000;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (n <= 0 || getaddrinfo(argv[1], argv[2], &hints, &ai) != 0) {
        fprintf(stderr, "%s: bad host, port or count\n", argv[0]);
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    conn_t *cs = calloc((size_t)n, sizeof *cs);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!cs || ep < 0) {
        perror("setup");
        return 2;
    }
    double t0 = now_ms();
    int done = 0;
    for (int i = 0; i < n; i++) {
        conn_t *c = &cs[i];
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
            perror("socket");
            return 2;
        }
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
            c->state = FAILED;
            done++;
            continue;
        }
        watch(ep, EPOLL_CTL_ADD, c, EPOLLOUT);
    }
    struct epoll_event ev[256];
    while (done < n) {
        int k = epoll_wait(ep, ev, 256, timeout_ms);
        if (k <= 0)
            break; /* the rest timed out */
        for (int j = 0; j < k; j++) {
            conn_t *c = ev[j].data.ptr;
            if (ev[j].events & (EPOLLERR | EPOLLHUP) && !(ev[j].events & EPOLLIN))
                fail(ep, c, &done);
            else if (c->state == CONNECTING)
                on_connected(ep, c, &done);
            else if (c->state == SENT)
                on_answer(ep, c, &done);
        }
    }
    double all = now_ms() - t0;
    double *lat = malloc((size_t)n * sizeof *lat);
    int ok = 0;
    for (int i = 0; i < n; i++)
        if (cs[i].state == ANSWERED)
            lat[ok++] = cs[i].latency_ms;
    if (!ok) {
        printf("conns=%d ok=0\n", n);
        return 1;
    }
    qsort(lat, (size_t)ok, sizeof *lat, by_value);
    printf("conns=%d ok=%d all_ms=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", n,
           ok, all, lat[ok / 2], lat[ok * 9 / 10], lat[ok * 99 / 100], lat[ok - 1]);
    for (int i = 0; i < n; i++)
        close(cs[i].fd);
    return ok == n ? 0 : 1;
}
