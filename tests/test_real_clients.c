/* Real client libraries nobody here wrote, through their synchronous APIs:
 * 200 fibers on ONE IOManager worker each make one request that takes
 * ~100 ms on the server, and the requests overlap (the whole run takes about
 * one request's time, not 200 of them).
 *
 *  - hiredis against a redis-server this test starts on a free port: each
 *    fiber does redisConnect + BLPOP on a key of its own with a 0.1 s
 *    timeout (redis answers nil after 100 ms and serves others meanwhile).
 *  - libcurl's easy API against a local HTTP server on plain threads (not
 *    fibers) that answers each request after 100 ms.
 *
 * Built twice, like test_hooks: hooks linked in, and on libspindle_nohook
 * with LD_PRELOAD=libspindle_preload.so. The fibers and the server are in
 * apps/hook_clients/clients.c, shared with spindle-hook-clients. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <spindle/timer.h>

#include "clients.h"

#include "testutil.h"

#ifndef SP_REDIS_SERVER
#define SP_REDIS_SERVER "redis-server"
#endif
#ifndef SP_FLAVOUR
#define SP_FLAVOUR "linked"
#endif

enum { FIBERS = 200, DELAY_MS = 100 };
#define MS 1000000ull

extern char **environ;

/* ---- a redis-server of our own ------------------------------------------ */

static pid_t redis_pid = -1;
static int redis_port;
static int redis_out = -1;     /* read end of its stdout + stderr */
static char redis_log[8192];   /* the latest of what it printed */
static size_t redis_log_len;
static char redis_error[256];  /* why it is not running, for the test */

/* A port nobody listens on right now: bind port 0, read it back, close. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

/* Read what redis prints until `needle` shows up (true), or it closes its
 * output (it exited), or the deadline passes (false). needle NULL: only
 * EOF returns true. */
static bool redis_read_until(const char *needle, uint64_t deadline_ns)
{
    for (;;) {
        if (needle && strstr(redis_log, needle))
            return true;
        uint64_t now = sp_now_ns();
        if (now >= deadline_ns)
            return false;
        struct pollfd p = {redis_out, POLLIN, 0};
        int n = poll(&p, 1, (int)((deadline_ns - now + MS - 1) / MS));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        char buf[1024];
        ssize_t got = read(redis_out, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return !needle;
        if (redis_log_len + (size_t)got >= sizeof redis_log) {
            /* Keep the newer half. */
            size_t keep = sizeof redis_log / 2;
            memmove(redis_log, redis_log + redis_log_len - keep, keep);
            redis_log_len = keep;
        }
        memcpy(redis_log + redis_log_len, buf, (size_t)got);
        redis_log_len += (size_t)got;
        redis_log[redis_log_len] = '\0';
    }
}

/* Stop the redis-server we started: SIGTERM, wait up to 5 s for it to
 * close its output, SIGKILL if it has not, reap it. */
static void redis_stop(void)
{
    if (redis_pid <= 0)
        return;
    kill(redis_pid, SIGTERM);
    if (!redis_read_until(NULL, sp_now_ns() + 5000 * MS))
        kill(redis_pid, SIGKILL);
    waitpid(redis_pid, NULL, 0);
    redis_pid = -1;
    close(redis_out);
    redis_out = -1;
}

/* One attempt on `port`. The child gets our environment without
 * LD_PRELOAD (the preload flavour's hooks are for this process only) and
 * dies with us (PR_SET_PDEATHSIG) should we die before redis_stop. */
static bool redis_spawn(int port)
{
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    char *argv[] = {SP_REDIS_SERVER, "--port", port_s, "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--hz", "100", "--loglevel", "notice", NULL};
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 1, sizeof *envp);
    int p[2];
    if (!envp || pipe2(p, O_CLOEXEC) < 0) {
        snprintf(redis_error, sizeof redis_error, "pipe: %s", strerror(errno));
        free(envp);
        return false;
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            envp[k++] = environ[i];
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        dup2(p[1], STDOUT_FILENO); /* the copies lose O_CLOEXEC */
        dup2(p[1], STDERR_FILENO);
        execve(SP_REDIS_SERVER, argv, envp);
        _exit(127);
    }
    int fork_errno = errno;
    free(envp);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        snprintf(redis_error, sizeof redis_error, "fork: %s", strerror(fork_errno));
        return false;
    }
    redis_pid = pid;
    redis_out = p[0];
    redis_port = port;
    redis_log_len = 0;
    redis_log[0] = '\0';
    /* It says so once its socket listens (Redis 5 to 7 alike). */
    if (redis_read_until("Ready to accept connections", sp_now_ns() + 5000 * MS)) {
        struct timeval tv = {5, 0};
        redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
        redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
        bool pong = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "PONG");
        freeReplyObject(r);
        redisFree(c);
        if (pong)
            return true;
    }
    snprintf(redis_error, sizeof redis_error, "redis-server on port %d did not answer "
             "PING within 5 s; it printed: %.180s", port, redis_log);
    redis_stop();
    return false;
}

/* Unchecked fixture: runs in Check's parent process, once for the tests
 * that use redis; a test fails with redis_error if this did not work. */
static void redis_start(void)
{
    /* The free port may be taken again before redis binds it: a few
     * attempts, each with a fresh one. */
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = free_port();
        if (port < 0) {
            snprintf(redis_error, sizeof redis_error, "no free port: %s", strerror(errno));
            return;
        }
        if (redis_spawn(port))
            return;
    }
}

/* ---- the checks both libraries share ------------------------------------ */

static void check_overlap(const char *what, const hc_result_t *one,
                          const hc_result_t *many)
{
    ck_assert_msg(one->ok == 1, "%s: one request failed: %s", what, one->error);
    ck_assert_msg(many->hooked, "%s: no hooks in this process", what);
    ck_assert_msg(many->fibers == FIBERS && many->ok == FIBERS,
                  "%s: %d of %d fibers ok; first failure: %s", what, many->ok,
                  many->fibers, many->error);
    /* Every request really waited on the server... */
    ck_assert_uint_ge(many->min_ns, (DELAY_MS - 10) * MS);
    ck_assert_uint_ge(many->wall_ns, DELAY_MS * MS);
    /* ...and they overlapped: one after another they would take 20 s. */
    ck_assert_msg(many->wall_ns < 2000 * MS,
                  "%s: %d requests took %.1f ms on one worker", what, FIBERS,
                  hc_ms(many->wall_ns));
    printf("%s (%s): 1 request %.1f ms; %d fibers on one worker %.1f ms "
           "(serial ~%.0f ms), each %.1f .. %.1f ms\n",
           what, SP_FLAVOUR, hc_ms(one->wall_ns), FIBERS, hc_ms(many->wall_ns),
           hc_ms(one->wall_ns) * FIBERS, hc_ms(many->min_ns), hc_ms(many->max_ns));
}

/* ---- hiredis ------------------------------------------------------------ */

START_TEST(hiredis_200_fibers_overlap)
{
    ck_assert_msg(redis_pid > 0, "%s", redis_error);
    hc_result_t one, many;
    ck_assert_int_eq(hc_redis_run("127.0.0.1", redis_port, 1, DELAY_MS, &one), 0);
    ck_assert_int_eq(hc_redis_run("127.0.0.1", redis_port, FIBERS, DELAY_MS, &many), 0);
    check_overlap("hiredis", &one, &many);
}
END_TEST

/* ---- libcurl ------------------------------------------------------------ */

START_TEST(libcurl_200_fibers_overlap)
{
    hc_http_server_t *srv = hc_http_server_start(DELAY_MS);
    ck_assert_msg(srv != NULL, "HTTP server: %s", strerror(errno));
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", hc_http_server_port(srv));
    hc_result_t one, many;
    ck_assert_int_eq(hc_curl_run(url, 1, &one), 0);
    ck_assert_int_eq(hc_curl_run(url, FIBERS, &many), 0);
    unsigned long served;
    int peak;
    hc_http_server_counts(srv, &served, &peak);
    hc_http_server_stop(srv);
    check_overlap("libcurl", &one, &many);
    ck_assert_uint_eq(served, 1 + FIBERS);
    ck_assert_int_gt(peak, 1); /* the server saw them at the same time */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("real_clients");
    TCase *redis = tcase_create("hiredis");
    tcase_set_timeout(redis, 60);
    tcase_add_unchecked_fixture(redis, redis_start, redis_stop);
    tcase_add_test(redis, hiredis_200_fibers_overlap);
    suite_add_tcase(s, redis);
    TCase *curl = tcase_create("libcurl");
    tcase_set_timeout(curl, 60);
    tcase_add_test(curl, libcurl_200_fibers_overlap);
    suite_add_tcase(s, curl);
    return sp_test_run(s);
}
