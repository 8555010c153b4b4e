/* Stack overflow reporting. A fiber that runs off the bottom of its stack
 * hits the guard region; the SIGSEGV handler runs on an alternate signal
 * stack (the fiber's own stack is exhausted), names the fiber on stderr and
 * lets the default action end the process. Faults elsewhere go to whatever
 * handler was installed before ours. Each thread's alternate stack is
 * set up with its fiber state (thread.c). */
#include "fiber_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous;

static size_t fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static void report(const struct sp_fiber *f)
{
    char msg[128];
    size_t n = 0;
    const char *a = "spindle: fiber ";
    memcpy(msg + n, a, strlen(a));
    n += strlen(a);
    n += fmt_u64(msg + n, f->id);
    msg[n++] = ' ';
    msg[n++] = '(';
    size_t len = strnlen(f->name, sizeof f->name);
    memcpy(msg + n, f->name, len);
    n += len;
    const char *b = ") overflowed its stack\n";
    memcpy(msg + n, b, strlen(b));
    n += strlen(b);
    ssize_t w = write(STDERR_FILENO, msg, n);
    (void)w;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    sp__thread_t *t = sp__thread_peek();
    const struct sp_fiber *f = t ? t->current : NULL;
    if (f && f->stack.lo) {
        const char *a = si->si_addr;
        if (a >= f->stack.lo && a < f->stack.lo + f->stack.guard) {
            report(f);
            signal(SIGSEGV, SIG_DFL); /* the retried access kills us */
            return;
        }
    }
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    signal(SIGSEGV, SIG_DFL);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous);
}

void sp__overflow_install(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
}
