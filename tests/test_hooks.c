/* Hooks: every hooked call, inside fibers on ONE worker (so a call that
 * blocked the thread would deadlock the test, which Check's timeout turns
 * into a failure) and from a plain thread (exactly libc). Built twice: with
 * the hooks linked in, and against libspindle_nohook with
 * LD_PRELOAD=libspindle_preload.so. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <spindle/hook.h>
#include <spindle/iomanager.h>
#include <spindle/timer.h>

#include "testutil.h"

static sp_iomanager_t *io;

/* Run each function as a fiber on a one-worker IOManager; return after all
 * of them (and whatever they spawned) finished. */
static void run_fibers(sp_fiber_fn *fns, void **args, int n)
{
    io = sp_iomanager_create("hooks", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(sp_schedule(sp_iomanager_scheduler(io), fns[i],
                                     args ? args[i] : NULL, 0), 0);
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
}

static void run1(sp_fiber_fn fn, void *arg)
{
    run_fibers(&fn, &arg, 1);
}

static int kernel_flags(int fd)
{
    return (int)syscall(SYS_fcntl, fd, F_GETFL);
}

static uint64_t ms_since(uint64_t t0)
{
    return (sp_now_ns() - t0) / 1000000;
}

static int sv[2];

static void make_pair(void)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

/* ---- read parks the fiber; a writer on the same worker gets to run ------ */

static char got[16];

static void blocking_reader(void *arg)
{
    (void)arg;
    ck_assert(sp_hook_is_enabled());
    ck_assert_int_eq(read(sv[0], got, sizeof got), 5);
}

static void late_writer(void *arg)
{
    (void)arg;
    ck_assert_int_eq(usleep(20000), 0);
    ck_assert_int_eq(write(sv[1], "hello", 5), 5);
}

START_TEST(read_parks_instead_of_blocking)
{
    make_pair();
    sp_fiber_fn fns[] = {blocking_reader, late_writer};
    run_fibers(fns, NULL, 2);
    ck_assert_int_eq(memcmp(got, "hello", 5), 0);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- readv, recv, recvfrom, recvmsg, writev, send, sendto, sendmsg ------ */

static void vector_io(void *arg)
{
    (void)arg;
    char a[3], b[4];
    struct iovec wv[2] = {{"abc", 3}, {"defg", 4}};
    ck_assert_int_eq(writev(sv[1], wv, 2), 7);
    struct iovec rv[2] = {{a, 3}, {b, 4}};
    ck_assert_int_eq(readv(sv[0], rv, 2), 7);
    ck_assert_int_eq(memcmp(b, "defg", 4), 0);
    ck_assert_int_eq(send(sv[1], "x", 1, 0), 1);
    ck_assert_int_eq(recv(sv[0], a, 1, 0), 1);
    ck_assert_int_eq(sendto(sv[1], "y", 1, 0, NULL, 0), 1);
    ck_assert_int_eq(recvfrom(sv[0], a, 1, 0, NULL, NULL), 1);
    ck_assert_int_eq(a[0], 'y');
    struct iovec one = {"z", 1};
    struct msghdr m = {.msg_iov = &one, .msg_iovlen = 1};
    ck_assert_int_eq(sendmsg(sv[1], &m, 0), 1);
    char c;
    struct iovec in = {&c, 1};
    struct msghdr r = {.msg_iov = &in, .msg_iovlen = 1};
    ck_assert_int_eq(recvmsg(sv[0], &r, 0), 1);
    ck_assert_int_eq(c, 'z');
}

START_TEST(every_read_and_write_call)
{
    make_pair();
    run1(vector_io, NULL);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- timeouts ----------------------------------------------------------- */

static void rcvtimeo(void *arg)
{
    (void)arg;
    struct timeval tv = {0, 50000};
    ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    char c;
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(read(sv[0], &c, 1), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_uint_ge(ms_since(t0), 50);
    struct timeval back;
    socklen_t len = sizeof back;
    ck_assert_int_eq(getsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &back, &len), 0);
    ck_assert(back.tv_sec == 0 && back.tv_usec >= 50000); /* kernel rounds up */
}

START_TEST(so_rcvtimeo_ends_with_eagain)
{
    make_pair();
    run1(rcvtimeo, NULL);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

static void sndtimeo(void *arg)
{
    (void)arg;
    struct timeval tv = {0, 50000};
    ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
    static char big[1 << 20];
    uint64_t t0 = sp_now_ns();
    ssize_t n = write(sv[1], big, sizeof big); /* nobody reads */
    ck_assert_int_gt(n, 0); /* partial progress is reported... */
    ck_assert_int_lt(n, (ssize_t)sizeof big);
    ck_assert_int_eq(write(sv[1], big, sizeof big), -1); /* ...then EAGAIN */
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_uint_ge(ms_since(t0), 100);
}

START_TEST(so_sndtimeo_partial_then_eagain)
{
    make_pair();
    run1(sndtimeo, NULL);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- user non-blocking fds get EAGAIN at once --------------------------- */

static void user_nonblock(void *arg)
{
    (void)arg;
    char c;
    /* fcntl */
    int fl = fcntl(sv[0], F_GETFL);
    ck_assert_int_eq(fl & O_NONBLOCK, 0);
    ck_assert_int_eq(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK), 0);
    ck_assert_int_ne(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(read(sv[0], &c, 1), -1);
    ck_assert_int_eq(errno, EAGAIN);
    /* ioctl(FIONBIO) */
    int on = 1;
    ck_assert_int_eq(ioctl(sv[1], FIONBIO, &on), 0);
    ck_assert_int_eq(read(sv[1], &c, 1), -1);
    ck_assert_int_eq(errno, EAGAIN);
    /* SOCK_NONBLOCK at creation */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ck_assert_int_ne(fcntl(s, F_GETFL) & O_NONBLOCK, 0);
    close(s);
}

START_TEST(user_nonblocking_gets_eagain)
{
    make_pair();
    run1(user_nonblock, NULL);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- sockets made in fibers are non-blocking underneath ----------------- */

static void views(void *arg)
{
    (void)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(fcntl(s, F_GETFL) & O_NONBLOCK, 0); /* user's view */
    ck_assert_int_ne(kernel_flags(s) & O_NONBLOCK, 0);   /* the kernel's */
    int off = 0;
    ck_assert_int_eq(ioctl(s, FIONBIO, &off), 0);
    /* FIONBIO(0) must not make the kernel socket blocking (sylar bug). */
    ck_assert_int_ne(kernel_flags(s) & O_NONBLOCK, 0);
    int on = 1;
    ck_assert_int_eq(ioctl(s, FIONBIO, &on), 0);
    ck_assert_int_ne(fcntl(s, F_GETFL) & O_NONBLOCK, 0);
    close(s);
    /* FIONBIO(0) on a waited socket: a read still parks (the writer below
     * runs on this same worker). */
    ck_assert_int_eq(ioctl(sv[0], FIONBIO, &off), 0);
    char c;
    ck_assert_int_eq(read(sv[0], &c, 1), 1);
}

static void write_one_later(void *arg)
{
    (void)arg;
    usleep(10000);
    ck_assert_int_eq(write(sv[1], "k", 1), 1);
}

START_TEST(fiber_sockets_nonblocking_underneath)
{
    make_pair();
    sp_fiber_fn fns[] = {views, write_one_later};
    run_fibers(fns, NULL, 2);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- partial writes: one big write completes ---------------------------- */

enum { BIG = 4 << 20 };
static size_t received;

static void big_writer(void *arg)
{
    (void)arg;
    char *buf = malloc(BIG);
    memset(buf, 'q', BIG);
    ck_assert_int_eq(write(sv[1], buf, BIG), BIG);
    free(buf);
    close(sv[1]);
}

static void slow_reader(void *arg)
{
    (void)arg;
    char buf[65536];
    ssize_t n;
    while ((n = read(sv[0], buf, sizeof buf)) > 0)
        received += (size_t)n;
    ck_assert_int_eq(n, 0);
}

START_TEST(partial_writes_complete)
{
    make_pair();
    received = 0;
    sp_fiber_fn fns[] = {big_writer, slow_reader};
    run_fibers(fns, NULL, 2);
    ck_assert_uint_eq(received, BIG);
    close(sv[0]);
}
END_TEST

/* A writev over many pieces that needs several partial writes, each ending
 * inside a different piece: every byte arrives, in order. */
enum { PIECES = 16, PIECE = 256 << 10 };
static unsigned char *vec_sent;
static size_t vec_bad;

static void vec_writer(void *arg)
{
    (void)arg;
    struct iovec iov[PIECES];
    for (int i = 0; i < PIECES; i++)
        iov[i] = (struct iovec){vec_sent + (size_t)i * PIECE, PIECE};
    ck_assert_int_eq(writev(sv[1], iov, PIECES), (ssize_t)PIECES * PIECE);
    close(sv[1]);
}

static void vec_reader(void *arg)
{
    (void)arg;
    unsigned char buf[65536];
    ssize_t n;
    while ((n = read(sv[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            vec_bad += buf[i] != vec_sent[received + (size_t)i];
        received += (size_t)n;
    }
    ck_assert_int_eq(n, 0);
}

START_TEST(partial_writev_keeps_order)
{
    make_pair();
    vec_sent = malloc((size_t)PIECES * PIECE);
    for (size_t i = 0; i < (size_t)PIECES * PIECE; i++)
        vec_sent[i] = (unsigned char)(i * 2654435761u >> 13);
    received = vec_bad = 0;
    sp_fiber_fn fns[] = {vec_writer, vec_reader};
    run_fibers(fns, NULL, 2);
    ck_assert_uint_eq(received, (size_t)PIECES * PIECE);
    ck_assert_uint_eq(vec_bad, 0);
    free(vec_sent);
    close(sv[0]);
}
END_TEST

/* ---- TCP: listen/accept/connect, EOF, peer reset, refused, timeout ------ */

static int listener(int backlog)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s, backlog), 0);
    return s;
}

static struct sockaddr_in addr_of(int s)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
    return a;
}

static int lfd;

static void tcp_server(void *arg)
{
    (void)arg;
    int c = accept(lfd, NULL, NULL); /* parks until the client connects */
    ck_assert_int_ge(c, 0);
    ck_assert_int_eq(fcntl(c, F_GETFL) & O_NONBLOCK, 0);
    char buf[8];
    ck_assert_int_eq(read(c, buf, 4), 4);
    ck_assert_int_eq(write(c, buf, 4), 4);
    ck_assert_int_eq(read(c, buf, 1), 0); /* EOF after the client closes */
    close(c);
    /* Peer reset: the client aborts with SO_LINGER 0. */
    c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    ck_assert_int_ge(c, 0);
    ck_assert_int_eq(read(c, buf, 1), -1);
    ck_assert_int_eq(errno, ECONNRESET);
    close(c);
}

static void tcp_client(void *arg)
{
    (void)arg;
    struct sockaddr_in a = addr_of(lfd);
    usleep(5000); /* let the server park in accept first */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(write(s, "ping", 4), 4);
    char buf[4];
    ck_assert_int_eq(read(s, buf, 4), 4);
    close(s);
    s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(s, (struct sockaddr *)&a, sizeof a), 0);
    struct linger lg = {1, 0};
    ck_assert_int_eq(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(s); /* sends RST */
}

START_TEST(tcp_accept_connect_eof_reset)
{
    lfd = listener(16);
    sp_fiber_fn fns[] = {tcp_server, tcp_client};
    run_fibers(fns, NULL, 2);
    close(lfd);
}
END_TEST

static void connect_refused(void *arg)
{
    (void)arg;
    int l = listener(1);
    struct sockaddr_in a = addr_of(l);
    close(l); /* nobody listens there now */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(s, (struct sockaddr *)&a, sizeof a), -1);
    ck_assert_int_eq(errno, ECONNREFUSED);
    close(s);
}

START_TEST(connect_refused_reported)
{
    run1(connect_refused, NULL);
}
END_TEST

/* A listener whose accept queue is full drops further SYNs: the connect
 * can only end by our timeout. */
static void connect_times_out(void *arg)
{
    (void)arg;
    int l = listener(0);
    struct sockaddr_in a = addr_of(l);
    int held[8], n = 0;
    sp_hook_set_connect_timeout(200000);
    uint64_t t0 = 0;
    int rc = 0;
    for (; n < 8; n++) {
        held[n] = socket(AF_INET, SOCK_STREAM, 0);
        t0 = sp_now_ns();
        rc = connect(held[n], (struct sockaddr *)&a, sizeof a);
        if (rc < 0)
            break;
    }
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(errno, ETIMEDOUT);
    ck_assert_uint_ge(ms_since(t0), 200);
    sp_hook_set_connect_timeout(75 * 1000000LL);
    for (int i = 0; i <= n && i < 8; i++)
        close(held[i]);
    close(l);
}

START_TEST(connect_timeout_etimedout)
{
    run1(connect_times_out, NULL);
}
END_TEST

/* ---- close / dup2 while another fiber waits ----------------------------- */

static _Atomic int waiter_errno;

static void wait_read(void *arg)
{
    (void)arg;
    char c;
    ck_assert_int_eq(read(sv[0], &c, 1), -1);
    atomic_store(&waiter_errno, errno);
}

static void close_it(void *arg)
{
    (void)arg;
    usleep(10000); /* the reader is parked by now */
    ck_assert_int_eq(close(sv[0]), 0);
}

static void dup2_over_it(void *arg)
{
    (void)arg;
    usleep(10000);
    int other = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(dup2(other, sv[0]), sv[0]);
    close(other);
}

START_TEST(close_wakes_waiter_ebadf)
{
    make_pair();
    sp_fiber_fn fns[] = {wait_read, close_it};
    run_fibers(fns, NULL, 2);
    ck_assert_int_eq(atomic_load(&waiter_errno), EBADF);
    close(sv[1]);
}
END_TEST

START_TEST(dup2_over_waited_fd_ebadf)
{
    make_pair();
    sp_fiber_fn fns[] = {wait_read, dup2_over_it};
    run_fibers(fns, NULL, 2);
    ck_assert_int_eq(atomic_load(&waiter_errno), EBADF);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

static void dup_family(void *arg)
{
    (void)arg;
    int d = dup(sv[0]);
    ck_assert_int_ge(d, 0);
    ck_assert_int_eq(fcntl(d, F_GETFL) & O_NONBLOCK, 0);
    int d3 = dup3(sv[0], d + 10, O_CLOEXEC);
    ck_assert_int_eq(d3, d + 10);
    int fd = fcntl(sv[0], F_DUPFD_CLOEXEC, 100);
    ck_assert_int_ge(fd, 100);
    /* A dup'd socket still parks: the writer below runs meanwhile. */
    char c;
    ck_assert_int_eq(read(d3, &c, 1), 1);
    close(d);
    close(d3);
    close(fd);
}

START_TEST(dup_copies_state)
{
    make_pair();
    sp_fiber_fn fns[] = {dup_family, write_one_later};
    run_fibers(fns, NULL, 2);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* ---- poll and select ---------------------------------------------------- */

static int sv2[2];

static void poll_two(void *arg)
{
    (void)arg;
    struct pollfd p[2] = {{sv[0], POLLIN, 0}, {sv2[0], POLLIN, 0}};
    ck_assert_int_eq(poll(p, 2, 5000), 1); /* the second gets data */
    ck_assert_int_eq(p[0].revents, 0);
    ck_assert_int_eq(p[1].revents, POLLIN);
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(poll(p, 1, 30), 0); /* times out */
    ck_assert_uint_ge(ms_since(t0), 30);
    t0 = sp_now_ns();
    ck_assert_int_eq(poll(NULL, 0, 30), 0); /* no fds: a sleep */
    ck_assert_uint_ge(ms_since(t0), 30);
    struct pollfd w = {sv[1], POLLOUT, 0};
    ck_assert_int_eq(poll(&w, 1, -1), 1);
    ck_assert_int_eq(w.revents, POLLOUT);
}

static void write_second_later(void *arg)
{
    (void)arg;
    usleep(10000);
    ck_assert_int_eq(write(sv2[1], "p", 1), 1);
}

START_TEST(poll_several_and_none)
{
    make_pair();
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
    sp_fiber_fn fns[] = {poll_two, write_second_later};
    run_fibers(fns, NULL, 2);
    for (int i = 0; i < 2; i++) {
        close(sv[i]);
        close(sv2[i]);
    }
}
END_TEST

static void select_two(void *arg)
{
    (void)arg;
    fd_set r;
    FD_ZERO(&r);
    FD_SET(sv[0], &r);
    FD_SET(sv2[0], &r);
    int n = (sv[0] > sv2[0] ? sv[0] : sv2[0]) + 1;
    struct timeval tv = {5, 0};
    ck_assert_int_eq(select(n, &r, NULL, NULL, &tv), 1);
    ck_assert(!FD_ISSET(sv[0], &r));
    ck_assert(FD_ISSET(sv2[0], &r));
    ck_assert_int_lt(tv.tv_sec, 5); /* Linux: time left */
    FD_ZERO(&r);
    FD_SET(sv[0], &r);
    struct timeval shortly = {0, 30000};
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(select(sv[0] + 1, &r, NULL, NULL, &shortly), 0);
    ck_assert_uint_ge(ms_since(t0), 30);
    ck_assert(!FD_ISSET(sv[0], &r));
}

START_TEST(select_several)
{
    make_pair();
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
    sp_fiber_fn fns[] = {select_two, write_second_later};
    run_fibers(fns, NULL, 2);
    for (int i = 0; i < 2; i++) {
        close(sv[i]);
        close(sv2[i]);
    }
}
END_TEST

/* ---- sleep family ------------------------------------------------------- */

static _Atomic int slept;

static void sleepy(void *arg)
{
    (void)arg;
    ck_assert_int_eq(usleep(50000), 0);
    atomic_fetch_add(&slept, 1);
}

START_TEST(hundred_sleepers_overlap)
{
    enum { N = 100 };
    sp_fiber_fn fns[N];
    for (int i = 0; i < N; i++)
        fns[i] = sleepy;
    atomic_store(&slept, 0);
    uint64_t t0 = sp_now_ns();
    run_fibers(fns, NULL, N);
    ck_assert_int_eq(atomic_load(&slept), N);
    /* Serial sleeps would take 5 s. */
    ck_assert_uint_lt(ms_since(t0), 2500);
}
END_TEST

static void sleep_calls(void *arg)
{
    (void)arg;
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(usleep(500), 0);
    ck_assert_uint_ge(sp_now_ns() - t0, 500000);
    struct timespec req = {0, 2000000}, rem = {7, 7};
    t0 = sp_now_ns();
    ck_assert_int_eq(nanosleep(&req, &rem), 0);
    ck_assert_uint_ge(sp_now_ns() - t0, 2000000);
    struct timespec bad = {0, 1000000000L};
    ck_assert_int_eq(nanosleep(&bad, NULL), -1);
    ck_assert_int_eq(errno, EINVAL);
    t0 = sp_now_ns();
    ck_assert_uint_eq(sleep(1), 0);
    ck_assert_uint_ge(ms_since(t0), 1000);
}

START_TEST(sleep_usleep_nanosleep)
{
    run1(sleep_calls, NULL);
}
END_TEST

/* ---- getaddrinfo off the worker ----------------------------------------- */

static _Atomic int resolving, resolved, ran_during_lookup = -1;

static void resolve(void *arg)
{
    (void)arg;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    atomic_store(&resolving, 1);
    ck_assert_int_eq(getaddrinfo("localhost", "80", &hints, &res), 0);
    atomic_store(&resolved, 1);
    ck_assert_ptr_nonnull(res);
    ck_assert(res->ai_family == AF_INET || res->ai_family == AF_INET6);
    freeaddrinfo(res);
}

/* Queued right behind `resolve` on the same single worker: it can only run
 * while the lookup is in flight if getaddrinfo parked instead of blocking
 * the worker thread. */
static void next_in_line(void *arg)
{
    (void)arg;
    atomic_store(&ran_during_lookup,
                 atomic_load(&resolving) && !atomic_load(&resolved));
}

/* Queues both from the worker itself, so neither starts before both are
 * queued (the test thread could be descheduled between two sp_schedule
 * calls while the worker ran the first fiber to its end). */
static void resolve_then_next(void *arg)
{
    (void)arg;
    sp_scheduler_t *s = sp_scheduler_current();
    ck_assert_int_eq(sp_schedule(s, resolve, NULL, 0), 0);
    ck_assert_int_eq(sp_schedule(s, next_in_line, NULL, 0), 0);
}

START_TEST(getaddrinfo_does_not_stall_worker)
{
    /* A helper thread may answer from /etc/hosts before the fiber has even
     * parked (then nothing could run meanwhile, legitimately); without the
     * hook the next fiber could never run during the lookup. So: several
     * lookups, and at least one must have let the next fiber run. */
    int overlapped = 0;
    for (int i = 0; i < 20; i++) {
        atomic_store(&resolving, 0);
        atomic_store(&resolved, 0);
        atomic_store(&ran_during_lookup, -1);
        run1(resolve_then_next, NULL);
        ck_assert_int_eq(atomic_load(&resolved), 1);
        overlapped += atomic_load(&ran_during_lookup) == 1;
    }
    ck_assert_int_gt(overlapped, 0);
}
END_TEST

/* ---- plain threads and the switch: exactly libc ------------------------- */

START_TEST(plain_thread_is_libc)
{
    ck_assert(!sp_hook_is_enabled());
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(kernel_flags(s) & O_NONBLOCK, 0); /* really blocking */
    close(s);
    make_pair();
    struct timeval tv = {0, 30000};
    ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    char c;
    uint64_t t0 = sp_now_ns();
    ck_assert_int_eq(read(sv[0], &c, 1), -1); /* the kernel's own timeout */
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_uint_ge(ms_since(t0), 29);
    ck_assert_int_eq(poll(NULL, 0, 10), 0);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

static void switched_off(void *arg)
{
    (void)arg;
    sp_hook_enable(false);
    ck_assert(!sp_hook_is_enabled());
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(kernel_flags(s) & O_NONBLOCK, 0);
    close(s);
    sp_hook_enable(true);
    ck_assert(sp_hook_is_enabled());
}

START_TEST(switch_off_per_thread)
{
    run1(switched_off, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks");
    TCase *tc = tcase_create("hooks");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, read_parks_instead_of_blocking);
    tcase_add_test(tc, every_read_and_write_call);
    tcase_add_test(tc, so_rcvtimeo_ends_with_eagain);
    tcase_add_test(tc, so_sndtimeo_partial_then_eagain);
    tcase_add_test(tc, user_nonblocking_gets_eagain);
    tcase_add_test(tc, fiber_sockets_nonblocking_underneath);
    tcase_add_test(tc, partial_writes_complete);
    tcase_add_test(tc, partial_writev_keeps_order);
    tcase_add_test(tc, tcp_accept_connect_eof_reset);
    tcase_add_test(tc, connect_refused_reported);
    tcase_add_test(tc, connect_timeout_etimedout);
    tcase_add_test(tc, close_wakes_waiter_ebadf);
    tcase_add_test(tc, dup2_over_waited_fd_ebadf);
    tcase_add_test(tc, dup_copies_state);
    tcase_add_test(tc, poll_several_and_none);
    tcase_add_test(tc, select_several);
    tcase_add_test(tc, hundred_sleepers_overlap);
    tcase_add_test(tc, sleep_usleep_nanosleep);
    tcase_add_test(tc, getaddrinfo_does_not_stall_worker);
    tcase_add_test(tc, plain_thread_is_libc);
    tcase_add_test(tc, switch_off_per_thread);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
