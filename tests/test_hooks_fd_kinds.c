/* fds other than sockets in fibers: an eventfd, timerfd, signalfd or
 * inotify fd made in a fiber, and a pipe or FIFO given to
 * sp_hook_adopt_fd, park the fiber that reads them (hooks/event_fds.c,
 * io/fd_adopt.c).
 *
 * On one worker, a fiber reads the fd; the next fiber makes it readable.
 * Should the read block the worker instead, the next fiber never runs: a
 * plain thread then makes the fd readable after a bounded wait, and the
 * test fails because the reader returned before the next fiber ran. Built
 * twice, like test_hooks. The user's view of the flags is kept, through
 * fcntl and fcntl64 alike. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <spindle/hook.h>

#include "hook_util.h"
#include "testutil.h"

enum { K_EVENTFD, K_TIMERFD, K_SIGNALFD, K_INOTIFY, K_PIPE, K_FIFO, K_KINDS };
enum { RESCUE_MS = 5000 };

static int kind;
static _Atomic int fd = -1, next_ran, read_rc;
static int aux = -1;          /* a pipe's write end; the FIFO's */
static char dir[64];          /* inotify's directory; the FIFO's */
static int ran_pipe[2];       /* the next fiber ran: a byte */

/* The fd of kind k, made here (in the reading fiber). */
static int make_fd(int k)
{
    sigset_t usr1;
    int p[2];
    char path[96];
    switch (k) {
    case K_EVENTFD: return eventfd(0, EFD_CLOEXEC);
    case K_TIMERFD: return timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    case K_SIGNALFD:
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        return signalfd(-1, &usr1, SFD_CLOEXEC);
    case K_INOTIFY: {
        int in = inotify_init1(IN_CLOEXEC);
        ck_assert_int_ge(inotify_add_watch(in, dir, IN_CREATE), 0);
        return in;
    }
    case K_PIPE:
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        aux = p[1];
        ck_assert_int_eq(sp_hook_adopt_fd(p[0]), 0);
        return p[0];
    default:
        snprintf(path, sizeof path, "%s/fifo", dir);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        aux = open(path, O_RDWR | O_CLOEXEC); /* opens at once: both ends */
        ck_assert_int_ge(aux, 0);
        int r = open(path, O_RDONLY | O_CLOEXEC);
        ck_assert_int_eq(sp_hook_adopt_fd(r), 0);
        return r;
    }
}

/* Make fd readable, the way kind k becomes so. */
static void make_readable(int k, int f)
{
    uint64_t one = 1;
    struct itimerspec soon = {.it_value = {0, 1}};
    char path[96];
    switch (k) {
    case K_EVENTFD: ck_assert_int_eq(write(f, &one, 8), 8); break;
    case K_TIMERFD: ck_assert_int_eq(timerfd_settime(f, 0, &soon, NULL), 0); break;
    case K_SIGNALFD: ck_assert_int_eq(kill(getpid(), SIGUSR1), 0); break;
    case K_INOTIFY:
        snprintf(path, sizeof path, "%s/made", dir);
        close(open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
        break;
    default: ck_assert_int_eq(write(aux, "x", 1), 1);
    }
}

static void reader(void *arg)
{
    (void)arg;
    int f = make_fd(kind);
    ck_assert_int_ge(f, 0);
    /* As the user asked: blocking. */
    ck_assert_int_eq(fcntl(f, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(fcntl64(f, F_GETFL) & O_NONBLOCK, 0);
    atomic_store(&fd, f);
    char buf[sizeof(struct signalfd_siginfo) + sizeof(struct inotify_event) + 256];
    ssize_t n = read(f, buf, sizeof buf);
    atomic_store(&read_rc, n > 0 && atomic_load(&next_ran) ? 1 : n > 0 ? 2 : -errno);
}

static void next_fiber(void *arg)
{
    (void)arg;
    atomic_store(&next_ran, 1);
    ck_assert_int_eq(write(ran_pipe[1], "r", 1), 1);
    make_readable(kind, atomic_load(&fd));
}

/* Unblocks a reader that held the worker, so the test ends and fails. */
static void *rescuer(void *arg)
{
    (void)arg;
    struct pollfd p = {ran_pipe[0], POLLIN, 0};
    if (poll(&p, 1, RESCUE_MS) == 0 && atomic_load(&fd) >= 0)
        make_readable(kind, atomic_load(&fd));
    return NULL;
}

START_TEST(read_parks_until_ready)
{
    kind = _i;
    atomic_store(&fd, -1);
    atomic_store(&next_ran, 0);
    atomic_store(&read_rc, 0);
    snprintf(dir, sizeof dir, "/tmp/sp_fdk_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(pipe(ran_pipe), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, rescuer, NULL), 0);
    run_on_one_worker(reader, next_fiber);
    pthread_join(t, NULL);
    ck_assert_msg(atomic_load(&read_rc) == 1,
                  "read: %d (2: it returned before the next fiber ran)", atomic_load(&read_rc));
    close(atomic_load(&fd));
    if (aux >= 0)
        close(aux);
    aux = -1;
    close(ran_pipe[0]);
    close(ran_pipe[1]);
    /* What inotify's and the FIFO's cases made in it (no shell: it would
     * inherit LD_PRELOAD, which a sanitizer build's shell cannot load). */
    char path[96];
    snprintf(path, sizeof path, "%s/made", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/fifo", dir);
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* EFD_NONBLOCK asked for: the user's EAGAIN, not a park. */
static void nonblocking_asked(void *arg)
{
    (void)arg;
    int f = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    uint64_t v;
    ck_assert_int_ne(fcntl(f, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(read(f, &v, 8), -1);
    ck_assert_int_eq(errno, EAGAIN);
    close(f);
}

START_TEST(nonblocking_as_asked)
{
    run_on_one_worker(nonblocking_asked, hook_nothing);
}
END_TEST

/* Regular files are refused, bad fds too; a released pipe is blocking in
 * the kernel again, as it was before it was adopted. */
START_TEST(adopt_refuses_and_release_restores)
{
    char path[] = "/tmp/sp_fdk_file_XXXXXX";
    int file = mkstemp(path);
    ck_assert_int_ge(file, 0);
    unlink(path);
    ck_assert_int_eq(sp_hook_adopt_fd(file), -EPERM);
    close(file);
    ck_assert_int_eq(sp_hook_adopt_fd(file), -EBADF);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(sp_hook_adopt_fd(p[0]), 0);
    ck_assert_int_ne(syscall(SYS_fcntl, p[0], F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(sp_hook_release_fd(p[0]), 0);
    ck_assert_int_eq(syscall(SYS_fcntl, p[0], F_GETFL) & O_NONBLOCK, 0);
    close(p[0]);
    close(p[1]);
}
END_TEST

int main(void)
{
    /* SIGUSR1 only through the signalfd: blocked in every thread. */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    Suite *s = suite_create("hooks_fd_kinds");
    TCase *tc = tcase_create("fd_kinds");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, read_parks_until_ready, 0, K_KINDS);
    tcase_add_test(tc, nonblocking_as_asked);
    tcase_add_test(tc, adopt_refuses_and_release_restores);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
