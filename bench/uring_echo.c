/* spindle-uring-echo: a minimal single-threaded echo server on io_uring, as
 * a bound for a batching I/O design (not built on the framework).
 *
 *   spindle-uring-echo PORT
 *
 * Listens on 127.0.0.1:PORT. Each connection keeps a multishot poll armed;
 * a readiness completion queues a recv (the data is there, so it completes
 * inside the next submit), a recv queues the send of what it got, and one
 * io_uring_submit_and_wait per loop turn hands the kernel every queued
 * operation at once: the recvs and sends of a whole batch of connections
 * cost one kernel entry. Exits on SIGTERM/SIGINT.
 * Run it beside the peers: ../shared/bench/echo_compare.sh --extra
 * uring="$PWD/build/bin/spindle-uring-echo %PORT%". Built only when
 * liburing is installed (scripts/deps.sh bench).
 */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BUF = 2048, RING = 4096 };

/* user_data: the connection pointer with the operation in its low bits
 * (0 with no pointer: the accept). */
enum { OP_ACCEPT, OP_POLL, OP_RECV, OP_SEND, OP_MASK = 3 };

typedef struct conn {
    int fd;
    bool busy;    /* a recv or send is in flight */
    bool pending; /* readable meanwhile: recv once the send is done */
    bool closing; /* the poll is being removed: free at its last CQE */
    char buf[BUF];
} conn_t;

static struct io_uring ring;
static int lfd;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static struct io_uring_sqe *sqe(void)
{
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    if (!s) { /* full: hand the kernel what is queued, then retry */
        io_uring_submit(&ring);
        s = io_uring_get_sqe(&ring);
    }
    if (!s) {
        fprintf(stderr, "spindle-uring-echo: submission queue full\n");
        exit(1);
    }
    return s;
}

static uint64_t tag(conn_t *c, int op)
{
    return (uint64_t)(uintptr_t)c | (uint64_t)op;
}

static void queue_accept(void)
{
    struct io_uring_sqe *s = sqe();
    io_uring_prep_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, OP_ACCEPT);
}

/* Readiness stays armed across messages (multishot): a recv is queued only
 * when data is there, so it completes inside the submit that carries it. */
static void queue_poll(conn_t *c)
{
    struct io_uring_sqe *s = sqe();
    io_uring_prep_poll_multishot(s, c->fd, POLLIN);
    io_uring_sqe_set_data64(s, tag(c, OP_POLL));
}

static void queue_recv(conn_t *c)
{
    c->busy = true;
    c->pending = false;
    struct io_uring_sqe *s = sqe();
    io_uring_prep_recv(s, c->fd, c->buf, BUF, MSG_DONTWAIT);
    io_uring_sqe_set_data64(s, tag(c, OP_RECV));
}

static void queue_send(conn_t *c, size_t n)
{
    struct io_uring_sqe *s = sqe();
    io_uring_prep_send(s, c->fd, c->buf, n, MSG_NOSIGNAL | MSG_WAITALL);
    io_uring_sqe_set_data64(s, tag(c, OP_SEND));
}

/* Remove the poll; the connection is freed at the poll's last CQE. */
static void finish(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    struct io_uring_sqe *s = sqe();
    io_uring_prep_poll_remove(s, tag(c, OP_POLL));
    io_uring_sqe_set_data64(s, tag(c, OP_ACCEPT)); /* its CQE is ignored */
}

static void on_accept(int fd)
{
    queue_accept();
    if (fd < 0)
        return; /* EMFILE and the like: the next accept tries again */
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->fd = fd;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    queue_poll(c);
}

static void on_complete(const struct io_uring_cqe *cqe)
{
    conn_t *c = (conn_t *)(uintptr_t)(cqe->user_data & ~(uint64_t)OP_MASK);
    int op = (int)(cqe->user_data & OP_MASK), res = cqe->res;
    if (!c) {
        if (op == OP_ACCEPT)
            on_accept(res);
        return;
    }
    switch (op) {
    case OP_POLL:
        if (!(cqe->flags & IORING_CQE_F_MORE)) { /* the poll ended */
            if (c->closing) {
                close(c->fd);
                free(c);
            } else if (res < 0) {
                finish(c);
            } else {
                queue_poll(c);
            }
        }
        if (res > 0 && !c->closing) {
            if (c->busy)
                c->pending = true;
            else
                queue_recv(c);
        }
        break;
    case OP_RECV:
        c->busy = false;
        if (res == -EAGAIN) /* a stale readiness: wait for the next */
            break;
        if (res <= 0) {
            finish(c);
            break;
        }
        c->busy = true;
        queue_send(c, (size_t)res);
        break;
    case OP_SEND:
        c->busy = false;
        if (res <= 0)
            finish(c);
        else if (c->pending)
            queue_recv(c);
        break;
    default: /* the poll removal's own CQE */
        break;
    }
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 0;
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: the wait returns */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)) {
        perror("spindle-uring-echo: listen");
        return 1;
    }
    int rc = io_uring_queue_init(RING, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
    if (rc < 0) {
        fprintf(stderr, "spindle-uring-echo: io_uring_queue_init: %d\n", rc);
        return 1;
    }
    printf("listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    queue_accept();
    while (!stop) {
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR) {
            fprintf(stderr, "spindle-uring-echo: io_uring_submit_and_wait: %d\n", rc);
            return 1;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            on_complete(cqe);
            seen++;
        }
        io_uring_cq_advance(&ring, seen);
    }
    io_uring_queue_exit(&ring);
    return 0;
}
