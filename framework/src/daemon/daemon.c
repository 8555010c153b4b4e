/* The daemon runner: detaching, and the supervisor loop that forks the
 * worker, restarts it with back-off and forwards stop/reload/quit signals.
 *
 * The supervisor is one plain thread taking every signal from a signalfd
 * or sigtimedwait (SIGCHLD included), so there are no signal handlers and
 * no races between "the worker died" and "stop was asked for". */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "daemon_internal.h"
#include "spindle/daemon.h"
#include "spindle/log.h"

/* Workers the supervisor restarted so far; a worker reads the count its
 * fork inherited (sp_daemon_restarts). */
static uint64_t restarts;

typedef struct supervisor {
    const char *name;
    int64_t backoff_min, backoff_max, stable;
    sp_daemon_fn worker;
    void *arg;
    int pid_fd;
    sp_logger_t *log;
    pid_t child;
    bool stopping;
    bool notify_ready;
    bool served;       /* a worker called sp_daemon_ready() */
    bool live_served;  /* the live worker did */
    int ready_rd;      /* read end of the live worker's ready pipe, or -1 */
    int fast_fails;    /* workers in a row that failed within the crash window */
    int sig_fd;        /* signalfd of supervisor_signals() */
    int verdict_fd;    /* detaching: the original process waits for the
                          first worker to serve; -1 once told */
} supervisor_t;

/* In the worker: the write end of its ready pipe (or -1), and whether its
 * stdio is still that of a start that is detaching. */
static struct {
    int fd;
    bool detaching;
} ready = {-1, false};

void sp_daemon_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
}

void sp_daemon_block_signals(void)
{
    sigset_t set;
    sp_daemon_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int sp_daemon_wait_signal(void)
{
    sigset_t set;
    sp_daemon_signals(&set);
    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    return sig;
}

static int64_t now_us(void)
{
    return (int64_t)(sp__now_ns() / 1000);
}

static int64_t or_default(int64_t v, int64_t def)
{
    return v > 0 ? v : def;
}

/* ---- detaching ---------------------------------------------------------- */

/* The original process: wait for the daemon's verdict on the pid file (one
 * byte, '0' = running) and exit with it. */
static void await_daemon(int fd, pid_t first_child)
{
    char verdict = '1';
    ssize_t n;
    while ((n = read(fd, &verdict, 1)) < 0 && errno == EINTR)
        ;
    waitpid(first_child, NULL, 0);
    _exit(n == 1 && verdict == '0' ? 0 : 1);
}

/* fork, setsid, fork: the daemon is no session leader, so it can never
 * acquire a controlling terminal again. Returns in the daemon with the
 * write end of the verdict pipe, or -1. */
static int detach(const char *name)
{
    int p[2];
    if (pipe(p) < 0) {
        fprintf(stderr, "%s: pipe: %s\n", name, strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", name, strerror(errno));
        return -1;
    }
    if (pid > 0) {
        close(p[1]);
        await_daemon(p[0], pid);
    }
    close(p[0]);
    setsid();
    pid = fork();
    if (pid != 0)
        _exit(pid < 0 ? 1 : 0);
    if (chdir("/") < 0) /* do not keep a mount point busy */
        _exit(1);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    return p[1];
}

static void null_stdio(void)
{
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        return;
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO)
        close(null);
}

/* Once the daemon holds its pid file (and with notify_ready once its first
 * worker serves): tell the original process, then drop the terminal's
 * stdio (messages until here still reached the user). */
static void finish_detach(int verdict_fd, bool ok)
{
    if (verdict_fd < 0)
        return;
    sp_log_flush(); /* the reason of a failure still reaches the terminal */
    ssize_t n = write(verdict_fd, ok ? "0" : "1", 1);
    (void)n; /* the original process exits 1 when it reads nothing */
    close(verdict_fd);
    null_stdio();
}

/* ---- the worker process -------------------------------------------------- */

void sp_daemon_ready(void)
{
    if (ready.fd < 0)
        return;
    ssize_t n = write(ready.fd, "1", 1);
    (void)n; /* cannot fail: one byte into an empty pipe */
    close(ready.fd);
    ready.fd = -1;
    if (ready.detaching)
        null_stdio(); /* as the supervisor does on this byte */
}

/* An orphan would keep serving beside the next instance, which finds the
 * pid lock free, and no signal would reach it: die with the supervisor.
 * SIGKILL, not a graceful stop: a supervisor that ends without stopping us
 * was killed, and a drain could outlast the start of its successor. The
 * getppid() check covers a supervisor that died before the prctl. */
static void die_with(pid_t supervisor)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != supervisor)
        _exit(1);
}

static void run_worker(supervisor_t *s, pid_t supervisor)
{
    die_with(supervisor);
    if (s->pid_fd >= 0)
        close(s->pid_fd); /* our copy; the lock is the supervisor's */
    close(s->sig_fd);
    ready.detaching = s->verdict_fd >= 0;
    if (ready.detaching)
        close(s->verdict_fd); /* the supervisor gives the verdict */
    /* SIGCHLD and SIGQUIT back to normal; SIGTERM, SIGINT and SIGHUP stay
     * blocked (a stop sent right after the fork waits for the worker's
     * sigwait). */
    signal(SIGCHLD, SIG_DFL);
    sigset_t own;
    sigemptyset(&own);
    sigaddset(&own, SIGCHLD);
    sigaddset(&own, SIGQUIT);
    sigprocmask(SIG_UNBLOCK, &own, NULL);
    int status = s->worker(s->arg);
    sp_log_shutdown();
    fflush(NULL);
    _exit(status);
}

/* The ready pipe: the worker writes one byte once it serves. Non-blocking:
 * the supervisor reads it after the worker died, when a process the worker
 * started might still hold the write end. */
static int ready_pipe(supervisor_t *s, int p[2])
{
    p[0] = p[1] = -1;
    if (!s->notify_ready || pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0)
        return 0;
    SP_LOG_ERROR(s->log, "%s: pipe: %s", s->name, strerror(errno));
    return -1;
}

static pid_t spawn(supervisor_t *s)
{
    int p[2];
    if (ready_pipe(s, p) < 0)
        return -1;
    pid_t supervisor = getpid();
    fflush(NULL); /* or the child would write our buffered output again */
    pid_t pid = fork();
    if (pid == 0) {
        if (p[0] >= 0)
            close(p[0]);
        ready.fd = p[1];
        run_worker(s, supervisor);
    }
    if (p[1] >= 0)
        close(p[1]);
    s->ready_rd = p[0];
    if (pid < 0)
        SP_LOG_ERROR(s->log, "%s: fork: %s", s->name, strerror(errno));
    else
        SP_LOG_INFO(s->log, "%s: worker %ld started", s->name, (long)pid);
    return pid;
}

/* ---- the supervisor ------------------------------------------------------ */

/* SIGQUIT is only passed on: a worker's to act on (a fiber dump, or by
 * default a core), never the supervisor's end. */
static void supervisor_signals(sigset_t *set)
{
    sp_daemon_signals(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGQUIT);
}

static void forward(supervisor_t *s, int sig)
{
    if (sig == SIGTERM || sig == SIGINT)
        s->stopping = true;
    if (sig == SIGHUP)
        sp_log_reopen(); /* our own log lines go to the rotated files too */
    if (s->child > 0)
        kill(s->child, sig);
}

static bool abnormal(int status)
{
    return WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
}

/* "killed by signal 9 (Killed)" or "exited with status 1". */
static void describe(int status, char *buf, size_t size)
{
    if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
}

static void log_death(supervisor_t *s, pid_t pid, int status)
{
    char why[96];
    describe(status, why, sizeof why);
    if (abnormal(status))
        SP_LOG_WARN(s->log, "%s: worker %ld %s", s->name, (long)pid, why);
    else
        SP_LOG_INFO(s->log, "%s: worker %ld %s", s->name, (long)pid, why);
}

/* The live worker's ready byte, or the EOF of its death. */
static void take_ready(supervisor_t *s)
{
    char c;
    bool ready = read(s->ready_rd, &c, 1) == 1;
    close(s->ready_rd);
    s->ready_rd = -1;
    if (!ready)
        return;
    s->served = s->live_served = true;
    finish_detach(s->verdict_fd, true);
    s->verdict_fd = -1;
}

/* The next signal; the worker's ready pipe is watched meanwhile. */
static int next_signal(supervisor_t *s)
{
    for (;;) {
        struct pollfd p[2] = {{s->sig_fd, POLLIN, 0}, {s->ready_rd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0)
            continue; /* EINTR */
        if (p[1].revents)
            take_ready(s);
        struct signalfd_siginfo si;
        if ((p[0].revents & POLLIN) && read(s->sig_fd, &si, sizeof si) == sizeof si)
            return (int)si.ssi_signo;
    }
}

/* Wait for the worker to die, forwarding signals meanwhile; its status. */
static int wait_worker(supervisor_t *s)
{
    for (;;) {
        int sig = next_signal(s);
        if (sig != SIGCHLD) {
            forward(s, sig);
            continue;
        }
        int status;
        pid_t pid = waitpid(s->child, &status, WNOHANG);
        if (pid == s->child) {
            log_death(s, pid, status);
            s->child = 0;
            return status;
        }
    }
}

/* Sleep for the back-off; false when a stop signal came meanwhile. A
 * SIGHUP still reopens our log files. */
static bool wait_backoff(supervisor_t *s, int64_t us)
{
    sigset_t set;
    supervisor_signals(&set);
    int64_t deadline = now_us() + us;
    for (int64_t left; !s->stopping && (left = deadline - now_us()) > 0;) {
        struct timespec ts = {(time_t)(left / 1000000), (long)(left % 1000000) * 1000};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig > 0 && sig != SIGCHLD)
            forward(s, sig); /* no worker now: only the supervisor's part */
    }
    return !s->stopping;
}

/* Exit status of a worker for the supervisor's own exit. */
static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Restarting cannot help a worker that fails at start (an address in use,
 * a missing directory): it would only fill the log, forever. A first
 * worker killed by a signal before it served is restarted: the signal
 * came from outside (or is a crash, which the crash loop bounds). */
static bool give_up(supervisor_t *s, int status, int64_t uptime)
{
    /* A failure at start: within the window, or (with notify_ready) before
     * serving at all, however long that took (a loaded machine). */
    bool at_start = uptime < SP_DAEMON_CRASH_WINDOW_US || (s->notify_ready && !s->live_served);
    s->fast_fails = at_start ? s->fast_fails + 1 : 0;
    char why[96];
    describe(status, why, sizeof why);
    if (s->notify_ready && !s->served && WIFEXITED(status)) {
        SP_LOG_ERROR(s->log, "%s: the worker could not start (%s); not restarting it",
                     s->name, why);
        return true;
    }
    if (s->fast_fails < SP_DAEMON_CRASH_LOOP)
        return false;
    SP_LOG_ERROR(s->log, "%s: %d workers in a row failed at start (within %d ms, or "
                 "before serving); giving up (last: %s)", s->name, s->fast_fails,
                 SP_DAEMON_CRASH_WINDOW_US / 1000, why);
    return true;
}

static int supervise(supervisor_t *s)
{
    int64_t backoff = s->backoff_min;
    for (;;) {
        int64_t started = now_us();
        s->live_served = false;
        if ((s->child = spawn(s)) < 0)
            return 1;
        int status = wait_worker(s);
        if (s->ready_rd >= 0) /* its death came first: the byte may be there */
            take_ready(s);
        int64_t uptime = now_us() - started;
        if (s->stopping || !abnormal(status) || give_up(s, status, uptime))
            return exit_code(status);
        if (uptime >= s->stable)
            backoff = s->backoff_min;
        SP_LOG_INFO(s->log, "%s: restarting the worker in %lld ms", s->name,
                    (long long)(backoff / 1000));
        if (!wait_backoff(s, backoff))
            return 0;
        restarts++;
        backoff = backoff * 2 < s->backoff_max ? backoff * 2 : s->backoff_max;
    }
}

/* Nothing to do: SIGCHLD only needs to be queued for the signalfd, and an
 * ignored (default) SIGCHLD may be discarded on some systems. */
static void on_chld(int sig)
{
    (void)sig;
}

static int run_supervised(supervisor_t *s)
{
    sigset_t set;
    supervisor_signals(&set);
    sigprocmask(SIG_BLOCK, &set, NULL);
    struct sigaction sa = {.sa_handler = on_chld};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    if ((s->sig_fd = signalfd(-1, &set, SFD_CLOEXEC)) < 0) {
        SP_LOG_ERROR(s->log, "%s: signalfd: %s", s->name, strerror(errno));
        return 1;
    }
    int rc = supervise(s);
    close(s->sig_fd);
    SP_LOG_INFO(s->log, "%s: supervisor exits (%d)", s->name, rc);
    return rc;
}

int sp_daemon_run(const sp_daemon_opts_t *opts, sp_daemon_fn worker, void *arg)
{
    supervisor_t s = {
        .name = opts->name ? opts->name : "spindle",
        .backoff_min = or_default(opts->backoff_min_us, SP_DAEMON_DEFAULT_BACKOFF_MIN_US),
        .backoff_max = or_default(opts->backoff_max_us, SP_DAEMON_DEFAULT_BACKOFF_MAX_US),
        .stable = or_default(opts->stable_us, SP_DAEMON_DEFAULT_STABLE_US),
        .worker = worker,
        .arg = arg,
        .pid_fd = -1,
        .log = sp_logger("spindle.daemon"),
        .notify_ready = opts->notify_ready,
        .ready_rd = -1,
        .sig_fd = -1,
        .verdict_fd = -1,
    };
    char pid_path[PATH_MAX] = "";
    bool has_pid_file = opts->pid_file && *opts->pid_file;
    if (has_pid_file && sp__path_absolute(opts->pid_file, pid_path, sizeof pid_path) < 0) {
        fprintf(stderr, "%s: pid file %s: path too long\n", s.name, opts->pid_file);
        return 1;
    }
    int verdict_fd = opts->detach ? detach(s.name) : -1;
    if (opts->detach && verdict_fd < 0)
        return 1;
    if (has_pid_file && (s.pid_fd = sp__pidfile_lock(s.name, pid_path)) < 0) {
        finish_detach(verdict_fd, false);
        return 1;
    }
    int rc;
    if (opts->no_supervisor) {
        finish_detach(verdict_fd, true);
        sp_daemon_block_signals();
        rc = worker(arg);
    } else {
        if (s.notify_ready)
            s.verdict_fd = verdict_fd; /* told when the first worker serves */
        else
            finish_detach(verdict_fd, true);
        rc = run_supervised(&s);
        finish_detach(s.verdict_fd, false); /* it never served */
    }
    sp__pidfile_release(s.pid_fd, pid_path);
    return rc;
}

uint64_t sp_daemon_restarts(void)
{
    return restarts;
}
