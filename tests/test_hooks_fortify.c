/* The waits real programs reach by other names. Under -D_FORTIFY_SOURCE=2
 * (this file is built with it and -O2, as Debian builds programs) glibc's
 * headers route read, recv, recvfrom, poll and ppoll to __*_chk variants
 * when they know the buffer's size; libraries with their own event loop
 * call epoll_wait, epoll_pwait, epoll_pwait2, ppoll or pselect (here on a
 * nested epoll fd). All must park the fiber. Each reader
 * runs on ONE worker before the fiber that writes: if its call blocked the
 * thread, the writer could not run and the reader's SO_RCVTIMEO (2 s)
 * would end it with EAGAIN instead of the data. Built twice, like
 * test_hooks: linked and preloaded. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/scheduler.h>

#include "hook_util.h"
#include "testutil.h"

enum {
    K_READ, K_RECV, K_RECVFROM, K_POLL, K_PPOLL, K_PSELECT, K_EPOLL_WAIT,
    K_EPOLL_PWAIT, K_EPOLL_PWAIT2, K_KINDS
};

static int sv[2];
static int kind;
/* Not constants: with a constant length glibc calls the plain function. */
static volatile size_t want = 1;
static volatile nfds_t nwant = 1;
static _Atomic long result = -2;

/* The epoll kinds: sv[0] in an epoll set of our own, nested in the
 * worker's. 1 once the one event came. */
static long epoll_kind(void)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event in = {.events = EPOLLIN, .data.fd = sv[0]}, out[4];
    ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &in), 0);
    struct timespec two = {2, 0};
    int n = kind == K_EPOLL_WAIT    ? epoll_wait(ep, out, 4, 2000)
            : kind == K_EPOLL_PWAIT ? epoll_pwait(ep, out, 4, 2000, NULL)
                                    : epoll_pwait2(ep, out, 4, &two, NULL);
    close(ep);
    return n == 1 && out[0].data.fd == sv[0];
}

static void reader(void *arg)
{
    (void)arg;
    char buf[64]; /* a size the compiler knows: the fortified path */
    struct pollfd pfd[1] = {{.fd = sv[0], .events = POLLIN}};
    struct sockaddr_storage from;
    socklen_t fromlen = sizeof from;
    switch (kind) {
    case K_READ: result = read(sv[0], buf, want); break;
    case K_RECV: result = recv(sv[0], buf, want, 0); break;
    case K_RECVFROM:
        result = recvfrom(sv[0], buf, want, 0, (struct sockaddr *)&from, &fromlen);
        break;
    case K_POLL: result = poll(pfd, nwant, 2000) == 1 && (pfd[0].revents & POLLIN); break;
    case K_PPOLL: {
        struct timespec two = {2, 0};
        result = ppoll(pfd, nwant, &two, NULL) == 1 && (pfd[0].revents & POLLIN);
        break;
    }
    case K_PSELECT: {
        fd_set rd;
        FD_ZERO(&rd);
        FD_SET(sv[0], &rd);
        struct timespec two = {2, 0};
        result = pselect(sv[0] + 1, &rd, NULL, NULL, &two, NULL) == 1 && FD_ISSET(sv[0], &rd);
        break;
    }
    default: result = epoll_kind(); break;
    }
}

static void writer(void *arg)
{
    (void)arg;
    ck_assert_int_eq(write(sv[1], "x", 1), 1);
}

START_TEST(fortified_calls_park)
{
    kind = _i;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct timeval tv = {2, 0};
    ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    run_on_one_worker(reader, writer);
    ck_assert_int_eq(result, 1); /* the writer ran while the reader waited */
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* glibc's check is kept: a read longer than the buffer aborts (through
 * __read_chk, which the imports test shows this file calls). */
static volatile size_t too_much = 16;

START_TEST(fortified_read_past_the_buffer_aborts)
{
    char buf[8];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(write(sv[1], "0123456789abcdef", 16), 16);
    ck_assert_int_lt(read(sv[0], buf, too_much), 0); /* never returns */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks_fortify");
    TCase *tc = tcase_create("fortify");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, fortified_calls_park, 0, K_KINDS);
    tcase_add_test_raise_signal(tc, fortified_read_past_the_buffer_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
