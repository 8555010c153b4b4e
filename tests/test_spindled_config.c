/* spindled's configuration against the real program: a value the worker
 * could not use stops the start with exit 2 and its file:line:column, and
 * is refused on SIGHUP with the old configuration kept; http.max_body 0
 * refuses every body; /status, /slow and the /echo WebSocket exist only when
 * enabled.
 *
 * The HTTP server listens on 127.0.0.1 port 0, read from the daemon's
 * "listening on" line (a Unix path appears only as a value refused before
 * anything listens). Every wait is bounded: poll with a deadline on the
 * daemon's output, a pidfd for its exit, inotify on a log file. */
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/daemon.h>

#include "testutil.h"

enum { WAIT_MS = 10000 };
#define ANY_PORT "127.0.0.1:0"

/* Made by the runner before the tests and removed after them all, so a
 * failed test's files go too; each test works in its own directory. */
static char base[40];
static char dir[64], conf[96], sock[96];
static int http_port; /* of the daemon serving */

static void make_base(void)
{
    sp_test_make_dir(base, sizeof base, "spindled-config");
}

static void remove_base(void)
{
    sp_test_remove_dir(base);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/t-XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(conf, sizeof conf, "%s/c.yml", dir);
    snprintf(sock, sizeof sock, "%s/http.sock", dir);
}

/* A configuration serving HTTP on `listen` only, then `extra` (YAML lines;
 * dotted keys such as "http.max_body: 0" add to the sections). */
static void put_config(const char *listen, const char *extra)
{
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "spindle: {workers: 1}\nhttp:\n  listen: ['%s']\necho: {enabled: false}\n%s",
            listen, extra);
    ck_assert_int_eq(fclose(f), 0);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the daemon ------------------------------------------------------------ */

typedef struct run {
    pid_t pid;
    int out; /* its stdout and stderr, merged */
    char text[16384];
    size_t len;
} run_t;

/* Start spindled with -c conf and `args` (NULL-terminated, at most 8).
 * A failed assertion ends the test process with _exit (no atexit
 * handlers), so the kernel stops the daemon: SIGTERM when its parent, the
 * test, dies (a graceful stop that takes its worker along). */
static void start(run_t *r, const char *const *args)
{
    const char *argv[12] = {"spindled", "-c", conf};
    for (int i = 0; args[i]; i++)
        argv[3 + i] = args[i];
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    *r = (run_t){.out = p[0]};
    pid_t test = getpid();
    r->pid = fork();
    ck_assert_int_ge(r->pid, 0);
    if (r->pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != test)
            _exit(127); /* the test is gone already */
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        close(p[1]);
        execv(SPINDLED, (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
}

/* Read its output until it contains `want` (NULL: until it is closed) or
 * the wait is over; whether `want` came. */
static bool await_output(run_t *r, const char *want)
{
    int64_t deadline = now_ms() + WAIT_MS;
    struct pollfd pfd = {r->out, POLLIN, 0};
    while (!(want && strstr(r->text, want)) && r->len < sizeof r->text - 1) {
        int64_t left = deadline - now_ms();
        if (left <= 0 || poll(&pfd, 1, (int)left) != 1)
            return false;
        ssize_t n = read(r->out, r->text + r->len, sizeof r->text - 1 - r->len);
        if (n <= 0)
            return !want;
        r->len += (size_t)n;
        r->text[r->len] = '\0';
    }
    return want && strstr(r->text, want);
}

/* Send `sig` (0: none), then its exit status once it ended (by itself, or
 * stopped with SIGTERM after WAIT_MS: the test then fails). */
static int finish(run_t *r, int sig)
{
    if (sig)
        ck_assert_int_eq(kill(r->pid, sig), 0);
    int pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
    ck_assert_int_ge(pidfd, 0);
    struct pollfd pfd = {pidfd, POLLIN, 0};
    bool ended = poll(&pfd, 1, WAIT_MS) == 1;
    close(pidfd);
    if (!ended)
        kill(r->pid, SIGTERM);
    int status;
    ck_assert_int_eq(waitpid(r->pid, &status, 0), r->pid);
    close(r->out);
    ck_assert_msg(ended, "spindled did not end; it wrote:\n%.1500s", r->text);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void start_serving(run_t *r)
{
    const char *none[] = {NULL};
    start(r, none);
    ck_assert_msg(await_output(r, "worker pid "), "spindled did not start:\n%.1500s", r->text);
    const char *line = strstr(r->text, "listening on 127.0.0.1:");
    ck_assert_ptr_nonnull(line);
    http_port = atoi(line + strlen("listening on 127.0.0.1:"));
    ck_assert_int_gt(http_port, 0);
}

/* ---- HTTP ------------------------------------------------------------------ */

/* Send `request` on a new connection and read the answer until the server
 * closes; its status code, or -1. */
static int http(const char *request, char *resp, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    size_t len = 0;
    struct pollfd pfd = {fd, POLLIN, 0};
    ssize_t n = 1;
    while (n > 0 && len < size - 1 && poll(&pfd, 1, WAIT_MS) == 1)
        if ((n = read(fd, resp + len, size - 1 - len)) > 0)
            len += (size_t)n;
    resp[len] = '\0';
    close(fd);
    int status;
    return sscanf(resp, "HTTP/1.1 %d", &status) == 1 ? status : -1;
}

static int get(const char *path, char *resp, size_t size)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
             path);
    return http(req, resp, size);
}

/* ---- tests ------------------------------------------------------------------ */

typedef struct bad {
    const char *yaml; /* after put_config's lines, which end at line 4 */
    const char *want; /* after "c.yml:" */
} bad_t;

static const bad_t bad_values[] = {
    {"http.root: /etc/passwd\n", "5:12: http.root: '/etc/passwd' is not a directory"},
    {"http.root: /nonexistent\n", "5:12: http.root: '/nonexistent': No such file"},
    {"echo.listen: []\n", "5:14: echo.listen: no address"},
    {"echo.listen: [127.0.0.1:8080, 127.0.0.1:70000]\n",
     "5:14: echo.listen: bad address '127.0.0.1:70000'"},
    {"echo.listen: [127.0.0.1:8080, 127.0.0.1:8080]\n",
     "5:14: echo.listen: '127.0.0.1:8080' clashes with '127.0.0.1:8080' before it"},
    {"echo.listen: [127.0.0.1:8080, '[::]:8080']\n",
     "5:14: echo.listen: '[::]:8080' clashes with '127.0.0.1:8080' before it"},
    {"echo.listen: ['unix:/nonexistent/s']\n",
     "5:14: echo.listen: the directory of 'unix:/nonexistent/s'"},
    {"http.server_name: \"a\\r\\nSet-Cookie: x\"\n",
     "5:19: http.server_name: control bytes"},
    {"http.server_name: \"a\\x01\"\n", "5:19: http.server_name: control bytes"},
    {"spindle.pid_file: /tmp\n", "5:19: spindle.pid_file: '/tmp' is a directory"},
    {"spindle.pid_file: /nonexistent/deeper/p.pid\n",
     "5:19: spindle.pid_file: the directory of '/nonexistent/deeper/p.pid'"},
    {"echo.listen: [127.0.0.1]\n", "5:14: echo.listen: bad address '127.0.0.1'"},
};

/* Run spindled (serving, not --print-config) on each bad value. */
START_TEST(each_bad_value_exits_2_with_file_line_column)
{
    setup();
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        put_config(ANY_PORT, bad_values[i].yaml);
        run_t r;
        const char *none[] = {NULL};
        start(&r, none);
        await_output(&r, NULL);
        ck_assert_int_eq(finish(&r, 0), 2);
        char want[512];
        snprintf(want, sizeof want, "%s:%s", conf, bad_values[i].want);
        ck_assert_msg(strstr(r.text, want), "no '%s' in:\n%.1500s", want, r.text);
    }
}
END_TEST

/* A server name of 1 MiB: refused with its length, not printed. */
START_TEST(huge_server_name_exits_2)
{
    setup();
    enum { HUGE = 1 << 20 };
    char *yaml = malloc(HUGE + 64);
    ck_assert_ptr_nonnull(yaml);
    int n = sprintf(yaml, "http.server_name: ");
    memset(yaml + n, 'x', HUGE);
    strcpy(yaml + n + HUGE, "\n");
    put_config(ANY_PORT, yaml);
    free(yaml);
    run_t r;
    const char *print[] = {"--print-config", NULL};
    start(&r, print);
    await_output(&r, NULL);
    ck_assert_int_eq(finish(&r, 0), 2);
    char want[256];
    snprintf(want, sizeof want, "%s:5:19: http.server_name: %d bytes, at most 117\n", conf,
             HUGE);
    ck_assert_msg(strstr(r.text, want), "no '%s' in:\n%.300s", want, r.text);
    ck_assert_uint_lt(r.len, 1024);
}
END_TEST

/* The environment and the command line are checked alike. */
START_TEST(bad_env_and_cli_values_exit_2)
{
    setup();
    put_config(ANY_PORT, "");
    run_t r;
    const char *cli[] = {"-s", "http.root=/etc/passwd", NULL};
    start(&r, cli);
    await_output(&r, NULL);
    ck_assert_int_eq(finish(&r, 0), 2);
    ck_assert_msg(strstr(r.text, "-s http.root=/etc/passwd: http.root: '/etc/passwd' is not"),
                  "got:\n%.1500s", r.text);
    setenv("SPINDLE_HTTP_LISTEN", "[]", 1);
    const char *none[] = {NULL};
    start(&r, none);
    await_output(&r, NULL);
    ck_assert_int_eq(finish(&r, 0), 2);
    ck_assert_msg(strstr(r.text, "env SPINDLE_HTTP_LISTEN: http.listen: no address"),
                  "got:\n%.1500s", r.text);
}
END_TEST

/* Run spindled with `args` to its end; whether it exited 2 having said
 * `want`. */
static bool refused_with(const char *const *args, const char *want)
{
    run_t r;
    start(&r, args);
    await_output(&r, NULL);
    int status = finish(&r, 0);
    if (status == 2 && strstr(r.text, want))
        return true;
    fprintf(stderr, "exit %d, no '%s' in:\n%.1500s\n", status, want, r.text);
    return false;
}

/* The HTTP and echo servers on one address would share its clients out
 * (SO_REUSEPORT lets both bind): refused, with both sources. */
START_TEST(servers_on_one_address_exit_2)
{
    setup();
    char listen[128], want[512];
    snprintf(listen, sizeof listen, "unix:%s", sock);
    put_config(listen, "");
    snprintf(listen, sizeof listen, "echo.listen=[unix:%s]", sock);
    const char *same_path[] = {"-s", "echo.enabled=true", "-s", listen, NULL};
    snprintf(want, sizeof want,
             "spindled: cli: echo.listen: 'unix:%s' clashes with 'unix:%s' of http.listen "
             "(%s:3:3)\n",
             sock, sock, conf);
    ck_assert(refused_with(same_path, want));
    const char *wildcard[] = {"-s", "echo.enabled=true", "-s", "echo.listen=[0.0.0.0:8080]",
                              "-s", "http.listen=[127.0.0.1:8080]", NULL};
    ck_assert(refused_with(wildcard, "echo.listen: '0.0.0.0:8080' clashes with "
                                     "'127.0.0.1:8080' of http.listen (cli)"));
    /* Port 0 is a new port each time; a disabled server listens nowhere. */
    const char *any_port[] = {"-s", "echo.enabled=true", "-s", "echo.listen=[127.0.0.1:0]",
                              "-s", "http.listen=[127.0.0.1:0]", "--print-config", NULL};
    run_t r;
    start(&r, any_port);
    await_output(&r, NULL);
    ck_assert_int_eq(finish(&r, 0), 0);
    const char *disabled[] = {"-s", "echo.listen=[0.0.0.0:8080]",
                              "-s", "http.listen=[127.0.0.1:8080]", "--print-config", NULL};
    start(&r, disabled);
    await_output(&r, NULL);
    ck_assert_int_eq(finish(&r, 0), 0);
}
END_TEST

START_TEST(max_body_0_refuses_bodies)
{
    setup();
    put_config(ANY_PORT, "http.max_body: 0\n");
    run_t r;
    start_serving(&r);
    char resp[4096];
    ck_assert_int_eq(http("POST /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n"
                          "Connection: close\r\n\r\nx",
                          resp, sizeof resp),
                     413);
    ck_assert_int_eq(http("POST /plaintext HTTP/1.1\r\nHost: t\r\n"
                          "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                          "1\r\nx\r\n0\r\n\r\n",
                          resp, sizeof resp),
                     413);
    /* No body is fine. */
    ck_assert_int_eq(http("GET /plaintext HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n"
                          "Connection: close\r\n\r\n",
                          resp, sizeof resp),
                     200);
    ck_assert_int_eq(finish(&r, SIGTERM), 0);
}
END_TEST

START_TEST(demo_routes_are_404_unless_enabled)
{
    setup();
    put_config(ANY_PORT, "");
    run_t r;
    start_serving(&r);
    char resp[4096];
    ck_assert_int_eq(get("/plaintext", resp, sizeof resp), 200);
    ck_assert_int_eq(get("/status", resp, sizeof resp), 404);
    ck_assert_int_eq(get("/slow?ms=1", resp, sizeof resp), 404);
    ck_assert_int_eq(get("/echo", resp, sizeof resp), 404);
    ck_assert_int_eq(finish(&r, SIGTERM), 0);

    put_config(ANY_PORT,
               "http.status_route: true\nhttp.slow_route: true\nhttp.ws_echo_route: true\n");
    start_serving(&r);
    ck_assert_int_eq(get("/status", resp, sizeof resp), 200);
    ck_assert_ptr_nonnull(strstr(resp, "\"pid\":"));
    ck_assert_int_eq(get("/slow?ms=1", resp, sizeof resp), 200);
    /* A plain GET of the WebSocket endpoint is told to upgrade. */
    ck_assert_int_eq(get("/echo", resp, sizeof resp), 426);
    ck_assert_int_eq(finish(&r, SIGTERM), 0);
}
END_TEST

/* A reload with one bad value changes nothing, not even its good values,
 * and says so. */
START_TEST(sighup_with_bad_value_keeps_old_configuration)
{
    setup();
    put_config(ANY_PORT, "http.status_route: true\n");
    run_t r;
    start_serving(&r);
    char resp[4096];
    ck_assert_int_eq(get("/status", resp, sizeof resp), 200);
    ck_assert_ptr_nonnull(strstr(resp, "\"keepalive_timeout_ms\":60000"));

    put_config(ANY_PORT, "http.status_route: true\nhttp.keepalive_timeout: 200ms\n"
               "http.root: /etc/passwd\n");
    ck_assert_int_eq(kill(r.pid, SIGHUP), 0);
    char want[256];
    snprintf(want, sizeof want, "%s:7:12: http.root: '/etc/passwd' is not a directory",
             conf);
    ck_assert_msg(await_output(&r, want), "no '%s' in:\n%.1500s", want, r.text);
    ck_assert_ptr_nonnull(strstr(r.text, "reload failed, old configuration kept"));
    ck_assert_int_eq(get("/status", resp, sizeof resp), 200);
    ck_assert_ptr_nonnull(strstr(resp, "\"keepalive_timeout_ms\":60000"));
    ck_assert_int_eq(finish(&r, SIGTERM), 0);
}
END_TEST

/* Wait until the file at `path` holds one of `wants` (NULL-terminated),
 * woken by inotify at each write; its index, or -1. Asserts nothing: it
 * runs while a daemon that is not the test's child is up. */
static int await_in_file(const char *path, const char *const *wants, char *buf, size_t size)
{
    int in = inotify_init1(IN_CLOEXEC);
    if (in < 0 || inotify_add_watch(in, path, IN_MODIFY) < 0)
        return -1;
    int64_t deadline = now_ms() + WAIT_MS;
    int found = -1;
    for (;;) {
        FILE *f = fopen(path, "r");
        buf[f ? fread(buf, 1, size - 1, f) : 0] = '\0';
        if (f)
            fclose(f);
        for (int i = 0; found < 0 && wants[i]; i++)
            found = strstr(buf, wants[i]) ? i : -1;
        int64_t left = deadline - now_ms();
        struct pollfd pfd = {in, POLLIN, 0};
        char events[4096];
        if (found >= 0 || left <= 0 || poll(&pfd, 1, (int)left) != 1 ||
            read(in, events, sizeof events) <= 0)
            break;
    }
    close(in);
    return found;
}

/* A detached daemon works in /: a relative http.root is still checked on
 * SIGHUP from the directory it started in, as it was resolved at start.
 * The daemon is no child of the test: nothing is asserted between reading
 * its pid and stopping it. */
START_TEST(detached_reload_takes_relative_root_from_start_directory)
{
    setup();
    char www[128], pid_file[128], log[128], extra[512];
    snprintf(www, sizeof www, "%s/www", dir);
    snprintf(pid_file, sizeof pid_file, "%s/p.pid", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    ck_assert_int_eq(mkdir(www, 0755), 0);
    FILE *f = fopen(log, "w"); /* there to be watched */
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(extra, sizeof extra,
             "spindle.pid_file: %s\nhttp.root: www\n"
             "log: {appenders: {f: {type: file, path: %s}}, root: [f]}\n",
             pid_file, log);
    put_config(ANY_PORT, extra);
    ck_assert_int_eq(chdir(dir), 0);
    run_t r;
    const char *detach[] = {"-d", NULL};
    start(&r, detach);
    await_output(&r, NULL);
    ck_assert_int_eq(finish(&r, 0), 0); /* once the daemon holds its pid file */
    pid_t pid = (pid_t)sp_daemon_read_pid(pid_file);
    ck_assert_int_gt(pid, 0);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int hup = kill(pid, SIGHUP);
    const char *outcomes[] = {"configuration reloaded\n", "old configuration kept", NULL};
    char text[8192] = "";
    int outcome = hup == 0 ? await_in_file(log, outcomes, text, sizeof text) : -1;
    int term = kill(pid, SIGTERM);
    struct pollfd pfd = {pidfd, POLLIN, 0};
    bool gone = pidfd >= 0 && poll(&pfd, 1, WAIT_MS) == 1;
    close(pidfd);
    ck_assert_int_eq(hup, 0);
    ck_assert_msg(outcome == 0, "log:\n%.1500s", text);
    ck_assert(term == 0 && gone);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("spindled_config");
    TCase *tc = tcase_create("spindled_config");
    tcase_add_unchecked_fixture(tc, make_base, remove_base);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, each_bad_value_exits_2_with_file_line_column);
    tcase_add_test(tc, huge_server_name_exits_2);
    tcase_add_test(tc, bad_env_and_cli_values_exit_2);
    tcase_add_test(tc, servers_on_one_address_exit_2);
    tcase_add_test(tc, max_body_0_refuses_bodies);
    tcase_add_test(tc, demo_routes_are_404_unless_enabled);
    tcase_add_test(tc, sighup_with_bad_value_keeps_old_configuration);
    tcase_add_test(tc, detached_reload_takes_relative_root_from_start_directory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a server that answers 413 may close first */
    return sp_test_run(suite());
}
