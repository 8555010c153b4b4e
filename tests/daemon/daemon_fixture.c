/* The daemon tests' shared parts (tests/daemon/test_daemon_*.c): a
 * temporary directory per test, spindled started on port 0 and talked to
 * over plain sockets, and every daemon the tests started stopped even when
 * one fails. Every wait is bounded (poll with a deadline, a pidfd for
 * process exits). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "daemon_fixture.h"

char dir[96];       /* this test's temporary directory */
char conf_path[160]; /* dir/spindle.yml */
char pid_path[160];  /* dir/spindled.pid */

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int left_ms(int64_t deadline)
{
    int64_t left = deadline - now_ms();
    return left > 0 ? (int)left : 0;
}

void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A configuration on port 0 with a pid file, plus `extra` YAML lines. */
void write_config(const char *extra)
{
    char text[1024];
    snprintf(text, sizeof text,
             "spindle:\n  workers: 2\n  pid_file: %s\n  shutdown_timeout: 10s\n"
             "http:\n  listen: [127.0.0.1:0]\n"
             "echo:\n  listen: [127.0.0.1:0]\n"
             "log:\n  level: info\n%s",
             pid_path, extra);
    write_file(conf_path, text);
}

/* Daemons this test started and has not reaped. A failed assertion ends
 * the test process with exit(): the atexit handler then stops them, so
 * no daemon outlives a failing test. */
pid_t live[16];

void track(pid_t pid, bool on)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (on ? live[i] == 0 : live[i] == pid) {
            live[i] = on ? pid : 0;
            return;
        }
}

void stop_leftovers(void)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] > 0)
            kill(live[i], SIGTERM);
}

/* Every test's directory is made inside `base`, which the runner process
 * creates before and removes after all tests: a failed test's process
 * ends without its teardown, and its files still go. */
char base[64];

void remove_tree(const char *path)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

void make_base(void)
{
    snprintf(base, sizeof base, "/tmp/spindled-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(base));
}

void remove_base(void)
{
    remove_tree(base);
}

void setup(void)
{
    atexit(stop_leftovers);
    snprintf(dir, sizeof dir, "%s/t-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(conf_path, sizeof conf_path, "%s/spindle.yml", dir);
    snprintf(pid_path, sizeof pid_path, "%s/spindled.pid", dir);
}

void teardown(void)
{
    remove_tree(dir);
}


/* ---- processes ---------------------------------------------------------- */


/* Start spindled in directory cwd (NULL: ours) with args (NULL-terminated,
 * after argv[0]). */
void spawn_in(proc_t *p, const char *cwd, const char *const *args)
{
    const char *argv[16] = {"spindled"};
    int n = 1;
    for (; args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int out[2], err[2];
    ck_assert_int_eq(pipe(out), 0);
    ck_assert_int_eq(pipe(err), 0);
    *p = (proc_t){0};
    p->pid = fork();
    ck_assert_int_ge(p->pid, 0);
    if (p->pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        /* Only 1 and 2 may hold the pipes: a detached daemon keeps every
         * other fd, and the test waits for EOF on them. */
        close(out[0]);
        close(err[0]);
        close(out[1]);
        close(err[1]);
        if (cwd && chdir(cwd) < 0)
            _exit(126);
        execv(SPINDLED, (char *const *)argv);
        _exit(127);
    }
    track(p->pid, true);
    close(out[1]);
    close(err[1]);
    p->out = out[0];
    p->err = err[0];
}

void spawn(proc_t *p, const char *const *args)
{
    spawn_in(p, NULL, args);
}

/* The next stdout line (without '\n') within the deadline, or NULL. */
const char *next_line(proc_t *p, int64_t deadline, char *line, size_t size)
{
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl) {
            size_t n = (size_t)(nl - p->buf);
            snprintf(line, size, "%.*s", (int)n, p->buf);
            memmove(p->buf, nl + 1, p->len - n - 1);
            p->len -= n + 1;
            return line;
        }
        struct pollfd pfd = {p->out, POLLIN, 0};
        if (poll(&pfd, 1, left_ms(deadline)) != 1)
            return NULL;
        ssize_t got = read(p->out, p->buf + p->len, sizeof p->buf - p->len - 1);
        if (got <= 0)
            return NULL;
        p->len += (size_t)got;
    }
}

/* Read "listening on ..." lines up to "worker pid N": the ports and pid of
 * the worker that just started. false when none came in time. */
bool await_worker(proc_t *p, int64_t deadline)
{
    char line[256];
    while (next_line(p, deadline, line, sizeof line)) {
        char *colon = strrchr(line, ':');
        if (strstr(line, "(http)") && colon)
            p->http_port = atoi(colon + 1);
        else if (strstr(line, "(https)") && colon)
            p->https_port = atoi(colon + 1);
        else if (strstr(line, "(echo)") && colon)
            p->echo_port = atoi(colon + 1);
        else if (strstr(line, "(admin)") && colon)
            p->admin_port = atoi(colon + 1);
        else if (sscanf(line, "worker pid %ld", &p->worker) == 1)
            return true;
    }
    return false;
}

void start_daemon(proc_t *p)
{
    const char *args[] = {"-c", conf_path, NULL};
    spawn(p, args);
    ck_assert_msg(await_worker(p, now_ms() + 10000), "spindled did not start");
    ck_assert_int_gt(p->http_port, 0);
    ck_assert_int_gt(p->echo_port, 0);
}

void restart_worker(proc_t *p)
{
    long old = p->worker;
    ck_assert_int_eq(kill((pid_t)old, SIGKILL), 0);
    p->http_port = p->https_port = p->echo_port = p->admin_port = 0;
    ck_assert_msg(await_worker(p, now_ms() + 5000), "no new worker within 5 s");
    ck_assert_int_ne(p->worker, old);
}

/* Wait for the process to exit (a pidfd: no polling loop); its status, or
 * -1 on timeout. */
int wait_exit(pid_t pid, int timeout_ms)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        struct pollfd pfd = {pidfd, POLLIN, 0};
        int ready = poll(&pfd, 1, timeout_ms);
        close(pidfd);
        if (ready != 1)
            return -1;
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    track(pid, false);
    return status;
}

/* stderr until `until` shows up in it (NULL: until the process closes
 * it), within 10 s. */
const char *read_err_until(proc_t *p, const char *until, char *buf, size_t size)
{
    size_t len = 0;
    int64_t deadline = now_ms() + 10000;
    struct pollfd pfd = {p->err, POLLIN, 0};
    buf[0] = '\0';
    while (len < size - 1 && !(until && strstr(buf, until)) &&
           poll(&pfd, 1, left_ms(deadline)) == 1) {
        ssize_t n = read(p->err, buf + len, size - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return buf;
}

const char *read_err(proc_t *p, char *buf, size_t size)
{
    return read_err_until(p, NULL, buf, size);
}

void close_proc(proc_t *p)
{
    close(p->out);
    close(p->err);
}

void stop_daemon(proc_t *p)
{
    ck_assert_int_eq(kill(p->pid, SIGTERM), 0);
    int status = wait_exit(p->pid, 20000);
    ck_assert_msg(status != -1, "spindled did not stop");
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close_proc(p);
}

/* ---- HTTP over plain sockets ---------------------------------------------- */

int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void send_get(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
}

/* One response (headers + Content-Length body) into buf; its status, 0
 * when the connection closed first, -1 on timeout. */
int read_response(int fd, char *buf, size_t size, int64_t deadline)
{
    size_t len = 0;
    for (;;) {
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        char *cl = strstr(buf, "Content-Length: ");
        if (end && cl && len >= (size_t)(end + 4 - buf) + (size_t)atoi(cl + 16))
            return atoi(buf + 9);
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, left_ms(deadline)) != 1)
            return -1;
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n <= 0)
            return 0;
        len += (size_t)n;
    }
}

/* GET on a new connection; the status, or <= 0 when it failed. */
int get(int port, const char *path, char *buf, size_t size, int64_t deadline)
{
    int fd = connect_port(port);
    if (fd < 0)
        return -1;
    send_get(fd, path);
    int status = read_response(fd, buf, size, deadline);
    close(fd);
    return status;
}

/* The value of "key": in the /status body, or -1. */
long status_field(int port, const char *key)
{
    char buf[1024], pat[64];
    if (get(port, "/status", buf, sizeof buf, now_ms() + 5000) != 200)
        return -1;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *at = strstr(buf, pat);
    return at ? atol(at + strlen(pat)) : -1;
}

/* Wait (bounded) until /status shows key == value. */
bool await_status(int port, const char *key, long value, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    do {
        if (status_field(port, key) == value)
            return true;
        poll(NULL, 0, 5); /* the daemon gives no event for this; re-ask */
    } while (now_ms() < deadline);
    return false;
}

/* A new connection to the echo service that got "ping" back, left open. */
int echo_ping(int port)
{
    int fd = connect_port(port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "ping", 4), 4);
    char back[4];
    struct pollfd pfd = {fd, POLLIN, 0};
    ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
    ck_assert_int_eq(read(fd, back, 4), 4);
    ck_assert_int_eq(memcmp(back, "ping", 4), 0);
    return fd;
}


/* Run spindled in cwd (NULL: ours) to completion with args; its exit
 * status, stdout in out. */
int run_in_to_end(const char *cwd, const char *const *args, char *out, size_t size,
                  char *err, size_t esize)
{
    proc_t p;
    spawn_in(&p, cwd, args);
    size_t len = 0;
    int64_t deadline = now_ms() + 10000;
    struct pollfd pfd = {p.out, POLLIN, 0};
    while (len < size - 1 && poll(&pfd, 1, left_ms(deadline)) == 1) {
        ssize_t n = read(p.out, out + len, size - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    read_err(&p, err, esize);
    int status = wait_exit(p.pid, 10000);
    close_proc(&p);
    ck_assert_int_ne(status, -1);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_to_end(const char *const *args, char *out, size_t size, char *err, size_t esize)
{
    return run_in_to_end(NULL, args, out, size, err, esize);
}


/* A process that is not our child: wait on its pidfd. */
bool await_gone(pid_t pid, int timeout_ms)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return errno == ESRCH;
    struct pollfd pfd = {pidfd, POLLIN, 0};
    bool gone = poll(&pfd, 1, timeout_ms) == 1;
    close(pidfd);
    return gone;
}
