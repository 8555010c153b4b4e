/* spindled and the daemon runner: the real program started on port 0 in a
 * temporary directory, talked to over plain sockets. Every wait is bounded
 * (poll with a deadline, a pidfd for process exits). */
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

#include <spindle/daemon.h>

#include "testutil.h"

static char dir[96];          /* this test's temporary directory */
static char conf_path[160];   /* dir/spindle.yml */
static char pid_path[160];    /* dir/spindled.pid */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(int64_t deadline)
{
    int64_t left = deadline - now_ms();
    return left > 0 ? (int)left : 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* A configuration on port 0 with a pid file, plus `extra` YAML lines. */
static void write_config(const char *extra)
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
static pid_t live[16];

static void track(pid_t pid, bool on)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (on ? live[i] == 0 : live[i] == pid) {
            live[i] = on ? pid : 0;
            return;
        }
}

static void stop_leftovers(void)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] > 0)
            kill(live[i], SIGTERM);
}

/* Every test's directory is made inside `base`, which the runner process
 * creates before and removes after all tests: a failed test's process
 * ends without its teardown, and its files still go. */
static char base[64];

static void remove_tree(const char *path)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

static void make_base(void)
{
    snprintf(base, sizeof base, "/tmp/spindled-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(base));
}

static void remove_base(void)
{
    remove_tree(base);
}

static void setup(void)
{
    atexit(stop_leftovers);
    snprintf(dir, sizeof dir, "%s/t-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(conf_path, sizeof conf_path, "%s/spindle.yml", dir);
    snprintf(pid_path, sizeof pid_path, "%s/spindled.pid", dir);
}

static void teardown(void)
{
    remove_tree(dir);
}

/* ---- processes ---------------------------------------------------------- */

typedef struct proc {
    pid_t pid;
    int out, err; /* its stdout and stderr (read ends) */
    char buf[4096];
    size_t len; /* bytes of stdout read and not yet taken as lines */
    int http_port, echo_port;
    long worker;
} proc_t;

/* Start spindled in directory cwd (NULL: ours) with args (NULL-terminated,
 * after argv[0]). */
static void spawn_in(proc_t *p, const char *cwd, const char *const *args)
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

static void spawn(proc_t *p, const char *const *args)
{
    spawn_in(p, NULL, args);
}

/* The next stdout line (without '\n') within the deadline, or NULL. */
static const char *next_line(proc_t *p, int64_t deadline, char *line, size_t size)
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
static bool await_worker(proc_t *p, int64_t deadline)
{
    char line[256];
    while (next_line(p, deadline, line, sizeof line)) {
        char *colon = strrchr(line, ':');
        if (strstr(line, "(http)") && colon)
            p->http_port = atoi(colon + 1);
        else if (strstr(line, "(echo)") && colon)
            p->echo_port = atoi(colon + 1);
        else if (sscanf(line, "worker pid %ld", &p->worker) == 1)
            return true;
    }
    return false;
}

static void start_daemon(proc_t *p)
{
    const char *args[] = {"-c", conf_path, NULL};
    spawn(p, args);
    ck_assert_msg(await_worker(p, now_ms() + 10000), "spindled did not start");
    ck_assert_int_gt(p->http_port, 0);
    ck_assert_int_gt(p->echo_port, 0);
}

/* Wait for the process to exit (a pidfd: no polling loop); its status, or
 * -1 on timeout. */
static int wait_exit(pid_t pid, int timeout_ms)
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
static const char *read_err_until(proc_t *p, const char *until, char *buf, size_t size)
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

static const char *read_err(proc_t *p, char *buf, size_t size)
{
    return read_err_until(p, NULL, buf, size);
}

static void close_proc(proc_t *p)
{
    close(p->out);
    close(p->err);
}

static void stop_daemon(proc_t *p)
{
    ck_assert_int_eq(kill(p->pid, SIGTERM), 0);
    int status = wait_exit(p->pid, 20000);
    ck_assert_msg(status != -1, "spindled did not stop");
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close_proc(p);
}

/* ---- HTTP over plain sockets ---------------------------------------------- */

static int connect_port(int port)
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

static void send_get(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
}

/* One response (headers + Content-Length body) into buf; its status, 0
 * when the connection closed first, -1 on timeout. */
static int read_response(int fd, char *buf, size_t size, int64_t deadline)
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
static int get(int port, const char *path, char *buf, size_t size, int64_t deadline)
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
static long status_field(int port, const char *key)
{
    char buf[1024], pat[64];
    if (get(port, "/status", buf, sizeof buf, now_ms() + 5000) != 200)
        return -1;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    char *at = strstr(buf, pat);
    return at ? atol(at + strlen(pat)) : -1;
}

/* Wait (bounded) until /status shows key == value. */
static bool await_status(int port, const char *key, long value, int timeout_ms)
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
static int echo_ping(int port)
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

/* ---- tests ------------------------------------------------------------------ */

START_TEST(serves_http_and_echo)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    char buf[1024];
    ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nHello, World!"));
    ck_assert_int_eq(get(p.http_port, "/json", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_int_eq(status_field(p.http_port, "pid"), p.worker);
    int fd = echo_ping(p.echo_port);
    close(fd);
    stop_daemon(&p);
    ck_assert_int_ne(access(pid_path, F_OK), 0); /* removed on exit */
}
END_TEST

START_TEST(second_instance_refused_by_pid_lock)
{
    write_config("");
    proc_t a, b;
    start_daemon(&a);
    ck_assert_int_eq(status_field(a.http_port, "pid"), a.worker);
    const char *args[] = {"-c", conf_path, NULL};
    spawn(&b, args);
    int status = wait_exit(b.pid, 10000);
    ck_assert_int_ne(status, -1);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char err[2048], want[64];
    read_err(&b, err, sizeof err);
    ck_assert_msg(strstr(err, pid_path), "no pid file in: %s", err);
    snprintf(want, sizeof want, "pid %ld", (long)a.pid);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    close_proc(&b);
    /* The first one is untouched. */
    char buf[512];
    ck_assert_int_eq(get(a.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    stop_daemon(&a);
}
END_TEST

START_TEST(worker_killed_is_restarted)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    long old = p.worker;
    ck_assert_int_eq(kill((pid_t)old, SIGKILL), 0);
    /* Within 2 s: a new worker reports its ports and answers. */
    int64_t deadline = now_ms() + 2000;
    ck_assert_msg(await_worker(&p, deadline), "no new worker within 2 s");
    ck_assert_int_ne(p.worker, old);
    char buf[512];
    int status;
    while ((status = get(p.http_port, "/plaintext", buf, sizeof buf, deadline)) != 200 &&
           left_ms(deadline) > 0)
        poll(NULL, 0, 5);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(status_field(p.http_port, "pid"), p.worker);
    /* A second death soon after: logged with its reason, and the back-off
     * doubled. */
    ck_assert_int_eq(kill((pid_t)p.worker, SIGKILL), 0);
    ck_assert(await_worker(&p, now_ms() + 5000));
    char err[8192], want[128];
    read_err_until(&p, "restarting the worker in 200 ms", err, sizeof err);
    snprintf(want, sizeof want, "worker %ld killed by signal 9", old);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_ptr_nonnull(strstr(err, "restarting the worker in 100 ms"));
    ck_assert_ptr_nonnull(strstr(err, "restarting the worker in 200 ms"));
    stop_daemon(&p);
}
END_TEST

enum { INFLIGHT = 100 };

START_TEST(sigterm_finishes_inflight_requests)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    int fds[INFLIGHT];
    for (int i = 0; i < INFLIGHT; i++) {
        ck_assert_int_ge(fds[i] = connect_port(p.http_port), 0);
        send_get(fds[i], "/slow?ms=1500");
    }
    ck_assert_msg(await_status(p.http_port, "slow_active", INFLIGHT, 5000),
                  "the slow requests are not all in progress");
    ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
    int64_t deadline = now_ms() + 10000;
    for (int i = 0; i < INFLIGHT; i++) {
        char buf[1024];
        ck_assert_int_eq(read_response(fds[i], buf, sizeof buf, deadline), 200);
        ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nslow done\n"));
        close(fds[i]);
    }
    int status = wait_exit(p.pid, 20000);
    ck_assert(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close_proc(&p);
}
END_TEST

/* Time until the server closes an idle connection, in ms, or -1. */
static int64_t closed_after(int fd, int timeout_ms)
{
    int64_t start = now_ms();
    struct pollfd pfd = {fd, POLLIN, 0};
    char c;
    if (poll(&pfd, 1, timeout_ms) != 1 || read(fd, &c, 1) != 0)
        return -1;
    return now_ms() - start;
}

START_TEST(sighup_changes_keepalive_timeout)
{
    char text[1024];
    snprintf(text, sizeof text,
             "spindle: {pid_file: %s}\nhttp: {listen: [127.0.0.1:0], keepalive_timeout: %s}\n"
             "echo: {enabled: false}\n",
             pid_path, "60s");
    write_file(conf_path, text);
    proc_t p;
    const char *args[] = {"-c", conf_path, NULL};
    spawn(&p, args);
    ck_assert(await_worker(&p, now_ms() + 10000));
    char buf[1024];
    /* An old idle keep-alive connection, and one with a request in flight. */
    int idle = connect_port(p.http_port), busy = connect_port(p.http_port);
    send_get(idle, "/plaintext");
    ck_assert_int_eq(read_response(idle, buf, sizeof buf, now_ms() + 5000), 200);
    send_get(busy, "/slow?ms=800");
    ck_assert(await_status(p.http_port, "slow_active", 1, 5000));

    snprintf(text, sizeof text,
             "spindle: {pid_file: %s}\nhttp: {listen: [127.0.0.1:0], keepalive_timeout: %s}\n"
             "echo: {enabled: false}\n",
             pid_path, "200ms");
    write_file(conf_path, text);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    ck_assert(await_status(p.http_port, "keepalive_timeout_ms", 200, 5000));

    /* The request in flight completes; old connections still work. */
    ck_assert_int_eq(read_response(busy, buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_ptr_nonnull(strstr(buf, "slow done"));
    send_get(idle, "/plaintext");
    ck_assert_int_eq(read_response(idle, buf, sizeof buf, now_ms() + 5000), 200);
    /* A connection opened after the reload is closed after ~200 ms idle. */
    int fresh = connect_port(p.http_port);
    send_get(fresh, "/plaintext");
    ck_assert_int_eq(read_response(fresh, buf, sizeof buf, now_ms() + 5000), 200);
    int64_t ms = closed_after(fresh, 5000);
    ck_assert_msg(ms >= 100 && ms < 2000, "closed after %lld ms", (long long)ms);
    close(fresh);
    close(idle);
    close(busy);
    stop_daemon(&p);
}
END_TEST

/* Write the configuration file: `yaml` after the pid file's line. */
static void rewrite_config(const char *yaml)
{
    char text[1024];
    snprintf(text, sizeof text, "spindle: {pid_file: %s}\n%s", pid_path, yaml);
    write_file(conf_path, text);
}

/* Start spindled on rewrite_config(yaml) and wait for its worker. */
static void start_with(proc_t *p, const char *yaml)
{
    rewrite_config(yaml);
    const char *args[] = {"-c", conf_path, NULL};
    spawn(p, args);
    ck_assert_msg(await_worker(p, now_ms() + 10000), "spindled did not start");
}

/* The echo service's timeouts come from the file and follow a reload: a
 * quiet connection, open since before the reload, is closed once the idle
 * timeout drops from 60 s to 200 ms, well before the 15 s the old timeouts
 * would check it after (the keep-alive change shows in /status when the
 * reload is done). */
START_TEST(echo_idle_timeout_from_config_and_reload)
{
    const char *yaml = "http: {listen: [127.0.0.1:0], keepalive_timeout: %s}\n"
                       "echo: {listen: [127.0.0.1:0], idle_timeout: %s, write_timeout: 60s}\n";
    char text[512];
    snprintf(text, sizeof text, yaml, "60s", "60s");
    proc_t p;
    start_with(&p, text);
    int quiet = echo_ping(p.echo_port);
    snprintf(text, sizeof text, yaml, "61s", "200ms");
    rewrite_config(text);
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    ck_assert(await_status(p.http_port, "keepalive_timeout_ms", 61000, 5000));
    ck_assert_int_ge(closed_after(quiet, 10000), 0);
    close(quiet);
    int fresh = echo_ping(p.echo_port);
    ck_assert_int_ge(closed_after(fresh, 10000), 0);
    close(fresh);
    stop_daemon(&p);
}
END_TEST

/* A log on a full disk (/dev/full: every write fails with ENOSPC): the
 * lines it loses show in /status. Each request logs an access line, so
 * asking again makes more; the count is looked at until it moves. */
START_TEST(status_counts_lost_log_lines)
{
    proc_t p;
    start_with(&p, "http: {listen: [127.0.0.1:0], access_log: true}\n"
                   "echo: {enabled: false}\n"
                   "log:\n  appenders: {full: {type: file, path: /dev/full}}\n"
                   "  root: [full]\n");
    int64_t deadline = now_ms() + 5000;
    long lost;
    while ((lost = status_field(p.http_port, "log_lost")) == 0 && now_ms() < deadline)
        poll(NULL, 0, 5); /* the writer is asynchronous; re-ask */
    ck_assert_int_gt(lost, 0);
    ck_assert_int_gt(status_field(p.http_port, "log_write_errors"), 0);
    char buf[1024];
    ck_assert_int_eq(get(p.http_port, "/status", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_ptr_nonnull(strstr(buf, "\"log_last_error\":\"No space left on device\""));
    stop_daemon(&p);
}
END_TEST

START_TEST(bad_reload_keeps_old_configuration)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    write_file(conf_path, "http:\n  keepalive_timeout: soon\n");
    ck_assert_int_eq(kill(p.pid, SIGHUP), 0);
    char err[4096], want[256];
    snprintf(want, sizeof want, "%s:2:22: http.keepalive_timeout", conf_path);
    read_err_until(&p, want, err, sizeof err);
    ck_assert_msg(strstr(err, "reload failed") && strstr(err, want), "got: %s", err);
    /* Still serving, with the old values. */
    char buf[512];
    ck_assert_int_eq(get(p.http_port, "/plaintext", buf, sizeof buf, now_ms() + 5000), 200);
    ck_assert_int_eq(status_field(p.http_port, "keepalive_timeout_ms"), 60000);
    stop_daemon(&p);
}
END_TEST

/* Run spindled in cwd (NULL: ours) to completion with args; its exit
 * status, stdout in out. */
static int run_in_to_end(const char *cwd, const char *const *args, char *out, size_t size,
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

static int run_to_end(const char *const *args, char *out, size_t size, char *err,
                      size_t esize)
{
    return run_in_to_end(NULL, args, out, size, err, esize);
}

START_TEST(print_config_shows_sources_and_precedence)
{
    write_config("");
    char text[512];
    snprintf(text, sizeof text,
             "spindle:\n  workers: 3\nhttp:\n  max_conns: 10\n  max_body: 2MiB\n"
             "  server_name: file\n");
    write_file(conf_path, text);
    /* file < env < command line */
    setenv("SPINDLE_SPINDLE_WORKERS", "4", 1);
    setenv("SPINDLE_HTTP_SERVER_NAME", "env", 1);
    const char *args[] = {"-c", conf_path, "-s", "http.server_name=cli", "--print-config",
                          NULL};
    static char out[16384];
    char err[1024];
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    char want[256];
    snprintf(want, sizeof want, "http.max_conns: 10  # %s:4:", conf_path);
    ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    ck_assert_ptr_nonnull(strstr(out, "spindle.workers: 4  # env SPINDLE_SPINDLE_WORKERS"));
    ck_assert_ptr_nonnull(strstr(out, "http.server_name: cli  # cli"));
    ck_assert_ptr_nonnull(strstr(out, "http.keepalive_timeout: 1m  # default"));
    ck_assert_ptr_nonnull(strstr(out, "log.level: "));
    ck_assert_int_ne(access(pid_path, F_OK), 0); /* nothing was started */
}
END_TEST

START_TEST(bad_config_names_file_line_column)
{
    write_file(conf_path, "http:\n  max_conns: lots\n");
    const char *args[] = {"-c", conf_path, NULL};
    char out[512], err[2048], want[256];
    ck_assert_int_ne(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s:2:14: ", conf_path);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    /* Malformed YAML too. */
    write_file(conf_path, "http: [unclosed\n");
    ck_assert_int_ne(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s:", conf_path);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
}
END_TEST

/* A process that is not our child: wait on its pidfd. */
static bool await_gone(pid_t pid, int timeout_ms)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0)
        return errno == ESRCH;
    struct pollfd pfd = {pidfd, POLLIN, 0};
    bool gone = poll(&pfd, 1, timeout_ms) == 1;
    close(pidfd);
    return gone;
}

START_TEST(detached_daemon_holds_pid_file)
{
    write_config("");
    const char *args[] = {"-c", conf_path, "-d", NULL};
    char out[512], err[1024];
    /* The original process exits 0 once the daemon holds the pid file. */
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    long pid = sp_daemon_read_pid(pid_path);
    ck_assert_int_gt(pid, 0);
    track((pid_t)pid, true);
    ck_assert_int_eq(kill((pid_t)pid, 0), 0);
    /* A second one is refused, also when it would detach. */
    ck_assert_int_ne(run_to_end(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(err, pid_path), "no pid file in: %s", err);
    ck_assert_int_eq(kill((pid_t)pid, SIGTERM), 0);
    ck_assert_msg(await_gone((pid_t)pid, 20000), "the daemon did not stop");
    track((pid_t)pid, false);
    ck_assert_int_ne(access(pid_path, F_OK), 0);
}
END_TEST

/* ---- one instance per port, and it dies with its supervisor ---------------- */

/* A directory to start spindled in, as from a checkout: conf/ is the
 * shipped one (conf/spindle.yml and conf/www). */
static void checkout(const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    char conf[256];
    snprintf(conf, sizeof conf, "%s/conf", path);
    ck_assert_int_eq(symlink(SPINDLE_CONF_DIR, conf), 0);
}

START_TEST(shipped_config_second_instance_refused)
{
    char here[128], there[128];
    checkout("a", here, sizeof here);
    checkout("b", there, sizeof there);
    /* The shipped ports may be busy on this machine: port 0 for the first. */
    const char *args[] = {"-c", "conf/spindle.yml", "-s", "http.listen=[127.0.0.1:0]",
                          "-s", "echo.listen=[127.0.0.1:0]", NULL};
    proc_t a;
    spawn_in(&a, here, args);
    ck_assert_msg(await_worker(&a, now_ms() + 10000), "spindled did not start");
    /* The shipped pid file, under the start directory. */
    char pid_file[192];
    snprintf(pid_file, sizeof pid_file, "%s/run/spindled.pid", here);
    ck_assert_int_eq(sp_daemon_read_pid(pid_file), a.pid);
    char out[1024], err[4096];
    /* The same command again: refused by the pid lock. */
    ck_assert_int_eq(run_in_to_end(here, args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "already running"), "got: %s", err);
    /* From elsewhere (its own pid file), on the first one's ports: refused
     * by the kernel, at once, since the ports are not shared. */
    char http[64], echo[64], want[128];
    snprintf(http, sizeof http, "http.listen=[127.0.0.1:%d]", a.http_port);
    snprintf(echo, sizeof echo, "echo.listen=[127.0.0.1:%d]", a.echo_port);
    const char *same_ports[] = {"-c", "conf/spindle.yml", "-s", http, "-s", echo, NULL};
    ck_assert_int_eq(run_in_to_end(there, same_ports, out, sizeof out, err, sizeof err), 1);
    snprintf(want, sizeof want, "http.listen [127.0.0.1:%d]: Address already in use",
             a.http_port);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_msg(strstr(err, "not restarting"), "got: %s", err);
    ck_assert_msg(!strstr(out, "listening on"), "it listened: %s", out);
    /* Every connection still reaches the first one. */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(status_field(a.http_port, "pid"), a.worker);
    stop_daemon(&a);
}
END_TEST

/* -d: the original process waits for the first worker to serve, so a
 * detached start on a busy port fails too, with the reason. */
START_TEST(detached_start_on_busy_port_exits_1)
{
    write_config("");
    proc_t a;
    start_daemon(&a);
    char pid_file[224], http[64], out[1024], err[4096], want[128];
    snprintf(pid_file, sizeof pid_file, "spindle.pid_file=%s/b.pid", dir);
    snprintf(http, sizeof http, "http.listen=[127.0.0.1:%d]", a.http_port);
    const char *args[] = {"-c", conf_path, "-d", "-s", pid_file, "-s", http, NULL};
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    snprintf(want, sizeof want, "http.listen [127.0.0.1:%d]: Address already in use",
             a.http_port);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_msg(strstr(err, "not restarting"), "got: %s", err);
    stop_daemon(&a);
}
END_TEST

START_TEST(reuse_port_shares_a_port_when_asked)
{
    write_config("");
    const char *args[] = {"-c", conf_path, "-s", "spindle.reuse_port=true", NULL};
    proc_t a, b;
    spawn(&a, args);
    ck_assert(await_worker(&a, now_ms() + 10000));
    char pid_file[224], http[64], echo[64];
    snprintf(pid_file, sizeof pid_file, "spindle.pid_file=%s/b.pid", dir);
    snprintf(http, sizeof http, "http.listen=[127.0.0.1:%d]", a.http_port);
    snprintf(echo, sizeof echo, "echo.listen=[127.0.0.1:%d]", a.echo_port);
    const char *args_b[] = {"-c", conf_path, "-s", "spindle.reuse_port=true", "-s", pid_file,
                            "-s", http, "-s", echo, NULL};
    spawn(&b, args_b);
    ck_assert_msg(await_worker(&b, now_ms() + 10000), "the second one did not start");
    ck_assert_int_eq(b.http_port, a.http_port);
    stop_daemon(&b);
    stop_daemon(&a);
}
END_TEST

START_TEST(supervisor_killed_takes_worker_down)
{
    write_config("");
    proc_t p;
    start_daemon(&p);
    pid_t worker = (pid_t)p.worker;
    track(worker, true);
    int64_t killed = now_ms();
    ck_assert_int_eq(kill(p.pid, SIGKILL), 0);
    int status = wait_exit(p.pid, 5000);
    ck_assert(status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ck_assert_msg(await_gone(worker, left_ms(killed + 1000)),
                  "the worker outlived its supervisor by 1 s");
    track(worker, false);
    ck_assert_int_lt(connect_port(p.http_port), 0);
    close_proc(&p);
}
END_TEST

START_TEST(crash_loop_stops_restarts)
{
    char root[128], root_arg[160];
    snprintf(root, sizeof root, "%s/www", dir);
    ck_assert_int_eq(mkdir(root, 0755), 0);
    snprintf(root_arg, sizeof root_arg, "http.root=%s", root);
    write_config("");
    const char *args[] = {"-c", conf_path, "-s", root_arg,
                          "-s", "spindle.restart_backoff_min=10ms",
                          "-s", "spindle.restart_backoff_max=20ms", NULL};
    proc_t p;
    spawn(&p, args);
    ck_assert(await_worker(&p, now_ms() + 10000));
    /* Every worker started from now on fails at once. */
    ck_assert_int_eq(rmdir(root), 0);
    ck_assert_int_eq(kill((pid_t)p.worker, SIGKILL), 0);
    int status = wait_exit(p.pid, 10000);
    ck_assert_msg(status != -1, "the supervisor kept restarting the worker");
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    static char err[32768];
    read_err(&p, err, sizeof err);
    char want[128];
    snprintf(want, sizeof want, "%d workers in a row failed within 1000 ms",
             SP_DAEMON_CRASH_LOOP);
    ck_assert_msg(strstr(err, want), "no '%s' in: %s", want, err);
    ck_assert_msg(strstr(err, "giving up (last: exited with status 1)"), "got: %s", err);
    close_proc(&p);
}
END_TEST

/* ---- the pid file ------------------------------------------------------------ */

static bool file_holds(const char *path, const char *text)
{
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

START_TEST(pid_file_link_refused)
{
    char target[160], out[512], err[2048];
    snprintf(target, sizeof target, "%s/precious", dir);
    write_file(target, "keep\n");
    write_config("");
    const char *args[] = {"-c", conf_path, NULL};
    ck_assert_int_eq(symlink(target, pid_path), 0);
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "refused: it is a symbolic link"), "got: %s", err);
    ck_assert(file_holds(target, "keep\n"));
    ck_assert_int_eq(unlink(pid_path), 0);
    ck_assert_int_eq(link(target, pid_path), 0);
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "single link"), "got: %s", err);
    ck_assert(file_holds(target, "keep\n"));
}
END_TEST

START_TEST(pid_file_directory_writable_by_others_refused)
{
    char pub[128], pid_arg[192], out[512], err[2048];
    snprintf(pub, sizeof pub, "%s/pub", dir);
    ck_assert_int_eq(mkdir(pub, 0755), 0);
    ck_assert_int_eq(chmod(pub, 0777), 0);
    snprintf(pid_arg, sizeof pid_arg, "spindle.pid_file=%s/spindled.pid", pub);
    write_config("");
    const char *args[] = {"-c", conf_path, "-s", pid_arg, NULL};
    ck_assert_int_eq(run_to_end(args, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "writable by others and not sticky"), "got: %s", err);
    /* Sticky, like /tmp: nobody else can remove or rename our file. */
    ck_assert_int_eq(chmod(pub, 01777), 0);
    proc_t p;
    spawn(&p, args);
    ck_assert_msg(await_worker(&p, now_ms() + 10000), "spindled did not start");
    stop_daemon(&p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("daemon");
    TCase *tc = tcase_create("spindled");
    tcase_add_unchecked_fixture(tc, make_base, remove_base);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, serves_http_and_echo);
    tcase_add_test(tc, second_instance_refused_by_pid_lock);
    tcase_add_test(tc, worker_killed_is_restarted);
    tcase_add_test(tc, sigterm_finishes_inflight_requests);
    tcase_add_test(tc, sighup_changes_keepalive_timeout);
    tcase_add_test(tc, bad_reload_keeps_old_configuration);
    tcase_add_test(tc, echo_idle_timeout_from_config_and_reload);
    tcase_add_test(tc, status_counts_lost_log_lines);
    tcase_add_test(tc, print_config_shows_sources_and_precedence);
    tcase_add_test(tc, bad_config_names_file_line_column);
    tcase_add_test(tc, detached_daemon_holds_pid_file);
    tcase_add_test(tc, shipped_config_second_instance_refused);
    tcase_add_test(tc, detached_start_on_busy_port_exits_1);
    tcase_add_test(tc, reuse_port_shares_a_port_when_asked);
    tcase_add_test(tc, supervisor_killed_takes_worker_down);
    tcase_add_test(tc, crash_loop_stops_restarts);
    tcase_add_test(tc, pid_file_link_refused);
    tcase_add_test(tc, pid_file_directory_writable_by_others_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return sp_test_run(suite());
}
