/* The spindle-echo program (and spindle-echo-load against it): argument
 * checks, nc, one thread with --workers 1, running out of fds, and its idle
 * and write-stall timeouts. Real sockets on 127.0.0.1. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/http.h>
#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>
#include <spindle/timer.h>

#include "tcp_util.h"
#include "testutil.h"

/* ---- the spindle-echo program ------------------------------------------- */

typedef struct proc {
    pid_t pid;
    int out; /* its stdout */
    int err; /* in: >= 0 to read its stderr; out: that pipe, or -1 */
    int port;
} proc_t;

/* Exit status of the echo program run with these arguments after
 * "--listen 127.0.0.1:0" (it exits before serving when they are bad). */
static int echo_exit_status(const char *args)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --listen 127.0.0.1:0 %s 2>/dev/null </dev/null",
             SPINDLE_ECHO, args);
    int st = system(cmd);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

START_TEST(echo_program_rejects_bad_numbers)
{
    const char *bad[] = {"--max-conns -1",    "--max-conns 12x",       "--max-conns ''",
                         "--workers 0",       "--workers two",         "--workers 99999999999",
                         "--idle-timeout -1", "--write-timeout 1.5s", "--idle-timeout"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(echo_exit_status(bad[i]) == 2, "%s", bad[i]);
}
END_TEST

/* Start spindle-echo with a file limit (0 = inherit), `workers` and the
 * arguments in `more` (NULL-terminated, at most 6; NULL: none), and read
 * its port. */
static void echo_start_with(proc_t *p, rlim_t nofile, const char *workers,
                            const char *const *more)
{
    const char *argv[12] = {"spindle-echo", "--listen", "127.0.0.1:0", "--workers", workers};
    for (int i = 0; more && more[i]; i++) {
        ck_assert_int_lt(i, 6);
        argv[5 + i] = more[i];
    }
    int pipefd[2], errfd[2] = {-1, -1};
    ck_assert_int_eq(pipe(pipefd), 0);
    if (p->err >= 0)
        ck_assert_int_eq(pipe(errfd), 0);
    p->pid = fork();
    ck_assert_int_ge(p->pid, 0);
    if (p->pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        if (errfd[1] >= 0)
            dup2(errfd[1], STDERR_FILENO);
        if (nofile) {
            struct rlimit rl = {nofile, nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        execv(SPINDLE_ECHO, (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    p->out = pipefd[0];
    if (errfd[1] >= 0)
        close(errfd[1]);
    p->err = errfd[0];
    char line[128] = {0};
    size_t got = 0;
    while (got < sizeof line - 1 && !strchr(line, '\n')) {
        ssize_t n = read(p->out, line + got, sizeof line - 1 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
    }
    char *colon = strrchr(line, ':');
    ck_assert_ptr_nonnull(colon);
    p->port = atoi(colon + 1);
    ck_assert_int_gt(p->port, 0);
}

static void echo_start(proc_t *p, rlim_t nofile, const char *workers)
{
    echo_start_with(p, nofile, workers, NULL);
}

static int echo_stop(proc_t *p)
{
    kill(p->pid, SIGTERM);
    int status;
    ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
    close(p->out);
    if (p->err >= 0)
        close(p->err);
    return status;
}

static sp_addr_t local(int port)
{
    sp_addr_t a;
    char text[32];
    snprintf(text, sizeof text, "127.0.0.1:%d", port);
    ck_assert_int_eq(sp_addr_parse(text, &a), 0);
    return a;
}

START_TEST(echo_program_with_nc)
{
    proc_t p = {.err = -1};
    echo_start(&p, 0, "2");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "printf 'one\\ntwo\\n' | nc -N 127.0.0.1 %d", p.port);
    FILE *nc = popen(cmd, "r");
    ck_assert_ptr_nonnull(nc);
    char out[64] = {0};
    size_t n = fread(out, 1, sizeof out - 1, nc);
    ck_assert_int_eq(pclose(nc), 0);
    ck_assert_uint_eq(n, 8);
    ck_assert_str_eq(out, "one\ntwo\n");
    int status = echo_stop(&p);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

static int threads_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* --workers 1: one thread in all (the main thread serves), and the stop
 * signal, read by a fiber, still drains: a connection open at SIGTERM is
 * served until it closes, then the program exits 0. */
START_TEST(echo_program_single_threaded)
{
    proc_t p = {.err = -1};
    echo_start(&p, 0, "1");
    ck_assert_int_eq(threads_of(p.pid), 1);
    sp_addr_t a = local(p.port);
    int fd = client(&a);
    roundtrip(fd, "before");
    ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
    roundtrip(fd, "during the drain");
    close(fd);
    int status;
    ck_assert_int_eq(waitpid(p.pid, &status, 0), p.pid);
    close(p.out);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* The load tool against the echo program: every message checked. */
START_TEST(load_tool_against_echo_program)
{
    proc_t p = {.err = -1};
    echo_start(&p, 0, "2");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s --connect 127.0.0.1:%d --conns 20 --size 100 --duration 0.5",
             SPINDLE_ECHO_LOAD, p.port);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char out[512] = {0};
    size_t n = fread(out, 1, sizeof out - 1, f);
    ck_assert_int_eq(pclose(f), 0); /* no failed connection, no bad byte */
    ck_assert_uint_gt(n, 0);
    unsigned long long msgs = 0;
    ck_assert_ptr_nonnull(strstr(out, "messages/s "));
    ck_assert_ptr_nonnull(strstr(out, "p99_us "));
    ck_assert_int_eq(sscanf(out, "messages %llu", &msgs), 1);
    ck_assert_uint_gt(msgs, 20);
    echo_stop(&p);
}
END_TEST

/* With 40 fds and no connection limit the server runs out after a few
 * dozen connections: it must shed the rest, stay up, and serve again once
 * clients go away. */
START_TEST(echo_program_survives_emfile)
{
    proc_t p = {.err = -1};
    const char *no_limit[] = {"--max-conns", "0", NULL};
    echo_start_with(&p, 40, "2", no_limit);
    sp_addr_t a = local(p.port);
    enum { N = 60 };
    int fds[N], served = 0, shed = 0;
    for (int i = 0; i < N; i++) {
        fds[i] = client(&a);
        char c = 'e';
        ck_assert_int_eq(write(fds[i], &c, 1), 1);
        struct pollfd pfd = {fds[i], POLLIN, 0};
        ck_assert_int_eq(poll(&pfd, 1, 5000), 1); /* echoed, or closed */
        ssize_t r = read(fds[i], &c, 1);
        if (r == 1)
            served++;
        else
            shed++;
    }
    ck_assert_int_gt(served, 0);
    ck_assert_int_gt(shed, 0);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    /* The server is still there and answers again once fds are free;
     * give it the time its back-off may need (at most 1 s). */
    int ok = 0;
    for (int attempt = 0; attempt < 40 && !ok; attempt++) {
        int fd = client(&a);
        char c = 'z';
        write(fd, &c, 1);
        struct pollfd pfd = {fd, POLLIN, 0};
        ok = poll(&pfd, 1, 2000) == 1 && read(fd, &c, 1) == 1 && c == 'z';
        close(fd);
    }
    ck_assert(ok);
    int status = echo_stop(&p);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- spindle-echo's timeouts ---------------------------------------------- */

/* Wait (bounded) for the server to end the connection: EOF, or a reset
 * when it closed with unread bytes. True if it did within 10 s. */
static bool closed_by_server(int fd)
{
    struct pollfd pfd = {fd, POLLRDHUP, 0};
    return poll(&pfd, 1, 10000) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* A client that sends nothing, and one that goes quiet after a message,
 * are closed after --idle-timeout. */
START_TEST(echo_program_idle_timeout)
{
    proc_t p = {.err = -1};
    const char *args[] = {"--idle-timeout", "200", NULL};
    echo_start_with(&p, 0, "2", args);
    sp_addr_t a = local(p.port);
    int silent = client(&a), quiet = client(&a);
    roundtrip(quiet, "one message");
    ck_assert(closed_by_server(silent));
    ck_assert(closed_by_server(quiet));
    char c;
    ck_assert_int_eq(read(quiet, &c, 1), 0); /* EOF after everything echoed */
    close(silent);
    close(quiet);
    ck_assert_int_eq(echo_stop(&p), 0);
}
END_TEST

/* A client that sends and never reads: the echo's writes stall, and after
 * --write-timeout the server closes the connection (the idle timeout is
 * off, so nothing else can). The client's tiny receive buffer makes the
 * stall come after a few KiB rather than after the kernel's buffers. */
START_TEST(echo_program_write_stall_timeout)
{
    proc_t p = {.err = -1};
    const char *args[] = {"--idle-timeout", "0", "--write-timeout", "200", NULL};
    echo_start_with(&p, 0, "2", args);
    sp_addr_t a = local(p.port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    ck_assert(connect(fd, (const struct sockaddr *)&a.ss, a.len) == 0 || errno == EINPROGRESS);
    static char chunk[64 << 10];
    size_t sent = 0;
    bool closed = false;
    while (!closed && sent < (64u << 20)) {
        ssize_t w = write(fd, chunk, sizeof chunk);
        if (w > 0) {
            sent += (size_t)w;
        } else if (errno == EAGAIN) {
            struct pollfd pfd = {fd, POLLOUT | POLLRDHUP, 0};
            ck_assert_msg(poll(&pfd, 1, 10000) == 1, "still open after 10 s, %zu bytes sent",
                          sent);
            closed = pfd.revents & (POLLRDHUP | POLLHUP | POLLERR);
        } else {
            closed = true; /* EPIPE, ECONNRESET: closed while we wrote */
        }
    }
    ck_assert(closed);
    close(fd);
    ck_assert_int_eq(echo_stop(&p), 0);
}
END_TEST

/* SIGQUIT makes the program write a fiber dump to stderr, and it serves
 * on: the dump's first and last lines arrive, then it stops as usual. */
START_TEST(echo_program_dumps_fibers_on_sigquit)
{
    proc_t p = {.err = 0};
    echo_start(&p, 0, "2");
    ck_assert_int_eq(kill(p.pid, SIGQUIT), 0);
    char text[65536];
    size_t got = 0;
    text[0] = '\0';
    while (!strstr(text, "end of fiber dump\n")) {
        struct pollfd pfd = {p.err, POLLIN, 0};
        ck_assert_msg(poll(&pfd, 1, 10000) == 1, "no dump after 10 s: %s", text);
        ssize_t n = read(p.err, text + got, sizeof text - 1 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
        text[got] = '\0';
    }
    ck_assert_ptr_nonnull(strstr(text, "spindle fiber dump: pid "));
    ck_assert_int_eq(echo_stop(&p), 0);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("echo_program");
    SP_TEST_CASE(s, "server", 120, NULL, NULL, echo_program_rejects_bad_numbers,
                 echo_program_with_nc, echo_program_single_threaded,
                 load_tool_against_echo_program, echo_program_survives_emfile,
                 echo_program_idle_timeout, echo_program_write_stall_timeout,
                 echo_program_dumps_fibers_on_sigquit);
    return sp_test_run(s);
}
