/* spindle-uring-batch: what the server side of a request/response loop
 * pays in the kernel per message when each recv and send is its own system
 * call, against the same recvs and sends batched through io_uring (one
 * io_uring_enter for all the recvs of a round, one for all the sends).
 *
 *   spindle-uring-batch [PAIRS=1000] [ROUNDS=200]
 *
 * PAIRS loopback TCP connections in one thread. A round: every client end
 * sends 64 bytes; the server ends receive and echo them (syscalls, or
 * io_uring); every client end reads its echo. The client side is the same
 * in both variants, so the difference of CPU per message (getrusage, user
 * + system) is the server side's. Three alternating repetitions.
 *
 * Why it exists: on a kernel that switches page tables on every system
 * call (PTI without PCID, as on some VMs this project was measured on),
 * entering the kernel is a large part of a small message's cost;
 * this measures how much a batching I/O path would save before anyone
 * builds one. Built only when liburing is installed (scripts/deps.sh bench).
 */
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MSG = 64 };

static int npairs;
static int *cl, *sv;
static char (*buf)[MSG];
static struct io_uring ring;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec * 1e-6;
}

static void connect_pairs(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4096) ||
        getsockname(ls, (struct sockaddr *)&a, &al))
        die("listen");
    int one = 1;
    for (int i = 0; i < npairs; i++) {
        cl[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (cl[i] < 0 || connect(cl[i], (struct sockaddr *)&a, sizeof a))
            die("connect (raise ulimit -n?)");
        if ((sv[i] = accept(ls, NULL, NULL)) < 0)
            die("accept");
        setsockopt(cl[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(sv[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    close(ls);
}

static void clients_send(void)
{
    static const char m[MSG] = "ping";
    for (int i = 0; i < npairs; i++)
        if (send(cl[i], m, MSG, 0) != MSG)
            die("client send");
}

static void clients_recv(void)
{
    char m[MSG];
    for (int i = 0; i < npairs; i++)
        if (recv(cl[i], m, MSG, MSG_WAITALL) != MSG)
            die("client recv");
}

static void server_syscalls(void)
{
    for (int i = 0; i < npairs; i++) {
        if (recv(sv[i], buf[i], MSG, 0) != MSG || send(sv[i], buf[i], MSG, 0) != MSG)
            die("server recv/send");
    }
}

/* All npairs operations of one kind in one submission; each must move a
 * whole message. */
static void uring_all(bool sending)
{
    for (int i = 0; i < npairs; i++) {
        struct io_uring_sqe *s = io_uring_get_sqe(&ring);
        if (sending)
            io_uring_prep_send(s, sv[i], buf[i], MSG, 0);
        else
            io_uring_prep_recv(s, sv[i], buf[i], MSG, 0);
    }
    if (io_uring_submit_and_wait(&ring, (unsigned)npairs) < 0)
        die("io_uring_submit_and_wait");
    struct io_uring_cqe *c;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, c)
    {
        if (c->res != MSG) {
            fprintf(stderr, "io_uring %s: %d\n", sending ? "send" : "recv", c->res);
            exit(1);
        }
        seen++;
    }
    io_uring_cq_advance(&ring, seen);
}

static void server_uring(void)
{
    uring_all(false);
    uring_all(true);
}

/* CPU ns per message over `rounds` rounds with this server side. */
static double run(void (*server)(void), int rounds)
{
    double t0 = cpu_s();
    for (int r = 0; r < rounds; r++) {
        clients_send();
        server();
        clients_recv();
    }
    return (cpu_s() - t0) * 1e9 / ((double)rounds * npairs);
}

int main(int argc, char **argv)
{
    npairs = argc > 1 ? atoi(argv[1]) : 1000;
    int rounds = argc > 2 ? atoi(argv[2]) : 200;
    if (npairs < 1 || rounds < 1) {
        fprintf(stderr, "usage: %s [PAIRS>=1] [ROUNDS>=1]\n", argv[0]);
        return 2;
    }
    cl = calloc((size_t)npairs, sizeof *cl);
    sv = calloc((size_t)npairs, sizeof *sv);
    buf = calloc((size_t)npairs, sizeof *buf);
    if (!cl || !sv || !buf)
        die("calloc");
    connect_pairs();
    int rc = io_uring_queue_init((unsigned)npairs, &ring, 0);
    if (rc < 0) {
        fprintf(stderr, "io_uring_queue_init: %d (io_uring disabled here?)\n", rc);
        return 1;
    }
    for (int rep = 0; rep < 3; rep++) {
        double sys = run(server_syscalls, rounds), ur = run(server_uring, rounds);
        printf("pairs %d, round %d: CPU per message %.0f ns with syscalls, %.0f ns with "
               "io_uring batches: %.0f ns less (%.2fx)\n",
               npairs, rep, sys, ur, sys - ur, ur / sys);
    }
    io_uring_queue_exit(&ring);
    return 0;
}
