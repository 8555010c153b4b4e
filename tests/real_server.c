/* See real_server.h. */
#include "real_server.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* A port nobody listens on right now on 127.0.0.1 (bind port 0, read it
 * back, close), or -1. */
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

/* Append what the server printed, keeping the newer half when full. */
static void keep_output(rs_server_t *s, const char *buf, size_t got)
{
    if (s->log_len + got >= sizeof s->log) {
        size_t keep = sizeof s->log / 2;
        memmove(s->log, s->log + s->log_len - keep, keep);
        s->log_len = keep;
    }
    memcpy(s->log + s->log_len, buf, got);
    s->log_len += got;
    s->log[s->log_len] = '\0';
}

/* Read what the server prints until it contains needle (true), or it
 * closes its output (it exited: true only for needle NULL), or timeout_ms
 * pass (false). */
static bool read_until(rs_server_t *s, const char *needle, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        if (needle && strstr(s->log, needle))
            return true;
        uint64_t now = now_ms();
        if (now >= deadline)
            return false;
        struct pollfd p = {s->out, POLLIN, 0};
        int n = poll(&p, 1, (int)(deadline - now));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        char buf[sizeof s->log / 2 - 1]; /* fits keep_output's half */
        ssize_t got = read(s->out, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return !needle;
        keep_output(s, buf, (size_t)got);
    }
}

/* Our environment without LD_PRELOAD: the preload flavour's hooks are for
 * the test process only. NULL when out of memory. */
static char **env_without_preload(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 1, sizeof *envp);
    for (size_t i = 0, k = 0; envp && i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            envp[k++] = environ[i];
    return envp;
}

static pid_t spawn(char *const argv[], char **envp, int out_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        dup2(out_fd, STDOUT_FILENO); /* the copies lose O_CLOEXEC */
        dup2(out_fd, STDERR_FILENO);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    return pid;
}

bool rs_start(rs_server_t *s, char *const argv[], const char *ready, int timeout_ms)
{
    memset(s, 0, sizeof *s);
    s->pid = -1;
    s->out = -1;
    char **envp = env_without_preload();
    int p[2];
    if (!envp || pipe2(p, O_CLOEXEC) < 0) {
        snprintf(s->error, sizeof s->error, "%s: %s", argv[0], strerror(errno));
        free(envp);
        return false;
    }
    pid_t pid = spawn(argv, envp, p[1]);
    int fork_errno = errno;
    free(envp);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        snprintf(s->error, sizeof s->error, "fork: %s", strerror(fork_errno));
        return false;
    }
    s->pid = pid;
    s->out = p[0];
    if (read_until(s, ready, timeout_ms))
        return true;
    snprintf(s->error, sizeof s->error, "%s did not say '%s' within %d ms; it printed: %.300s",
             argv[0], ready ? ready : "(its end)", timeout_ms, s->log);
    rs_stop(s);
    return false;
}

bool rs_run(rs_server_t *s, char *const argv[], int timeout_ms)
{
    if (!rs_start(s, argv, NULL, timeout_ms)) /* NULL: until its output ends */
        return false;
    int status = 0;
    waitpid(s->pid, &status, 0);
    close(s->out);
    s->pid = -1;
    s->out = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return true;
    snprintf(s->error, sizeof s->error, "%s failed; it printed: %.300s", argv[0], s->log);
    return false;
}

void rs_stop(rs_server_t *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGCONT); /* a test may have left it stopped */
    kill(s->pid, SIGTERM);
    if (!read_until(s, NULL, 10000))
        kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    close(s->out);
    s->pid = -1;
    s->out = -1;
}

int rs_start_on_free_port(rs_server_t *s, bool (*spawn)(int port))
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int port = free_port();
        if (port < 0) {
            snprintf(s->error, sizeof s->error, "no free port: %s", strerror(errno));
            return -1;
        }
        if (spawn(port))
            return port;
    }
    return -1;
}

bool rs_make_dir(char *buf, size_t size, const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(buf, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return false;
    }
    return mkdtemp(buf) != NULL;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void rs_remove_dir(const char *path)
{
    /* Depth first, without following symlinks out of the tree. */
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
