/* sp_fibers_dump_on_signal(_to_log) (debug.h): a signal asks for a dump.
 *
 * The handler only writes a byte to a pipe (async-signal-safe); a thread
 * of our own reads it and makes the dump, which takes locks and allocates.
 * A thread, not a fiber: it works with every scheduler busy or stuck,
 * which is when a dump is wanted. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "spindle/debug.h"

static int pipe_fds[2] = {-1, -1};
static FILE *dump_out;      /* the dump's file, or NULL: */
static sp_logger_t *dump_log; /* through this logger */
static sp_log_level_t dump_level;
static _Atomic int installed;

static void on_signal(int signo)
{
    (void)signo;
    int saved = errno;
    char c = 0;
    /* Non-blocking: with the pipe full a dump is already coming. */
    ssize_t n = write(pipe_fds[1], &c, 1);
    (void)n;
    errno = saved;
}

static void *dumper(void *arg)
{
    (void)arg;
    char buf[64];
    for (;;) {
        ssize_t n = read(pipe_fds[0], buf, sizeof buf);
        if (n > 0 && dump_out)
            sp_fibers_dump(dump_out, 0);
        else if (n > 0)
            sp_fibers_dump_to_log(dump_log, dump_level);
        else if (n == 0 || errno != EINTR)
            return NULL;
    }
}

/* The dumper thread, with every signal blocked so none lands on it. */
static int start_dumper(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, dumper, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -rc;
}

/* The pipe, the thread and the handler, once the target is set. */
static int install(int signo)
{
    int rc = 0;
    if (pipe2(pipe_fds, O_CLOEXEC) != 0 || fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK) != 0)
        rc = -errno;
    else
        rc = start_dumper();
    if (rc == 0) {
        struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        if (sigaction(signo, &sa, NULL) != 0)
            rc = -errno; /* a bad signo: the thread waits for nothing */
    }
    return rc;
}

int sp_fibers_dump_on_signal(int signo, int fd)
{
    if (atomic_exchange(&installed, 1))
        return -EALREADY;
    int rc = 0;
    int out = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (out < 0 || !(dump_out = fdopen(out, "w")))
        rc = -errno;
    else
        rc = install(signo);
    if (rc < 0)
        atomic_store(&installed, 0);
    return rc;
}

int sp_fibers_dump_on_signal_to_log(int signo, sp_logger_t *lg, sp_log_level_t level)
{
    if (atomic_exchange(&installed, 1))
        return -EALREADY;
    dump_log = lg;
    dump_level = level;
    int rc = install(signo);
    if (rc < 0)
        atomic_store(&installed, 0);
    return rc;
}
