/* tickle: how long a sleeping IOManager worker takes to start a task
 * scheduled from another thread.
 *
 * One worker (not the caller) sleeps in its libev loop. A plain thread,
 * every ~100 us (and only once the previous task has run, so the worker is
 * asleep again), reads the clock and calls sp_schedule(); the task reads
 * the clock as it starts. Latency = start - schedule: the pipe write that
 * wakes the worker, the kernel's wake-up of a thread blocked in
 * epoll_wait (on another CPU when there is one), the loop's return and the
 * switch into the task.
 *
 * tickle.*_cpu is the woken thread's CPU time per wake-up (wake, run the
 * task, go back to sleep), which scheduling delays do not inflate.
 *
 * The floor is the same wake-up without the framework: a plain thread
 * blocked in epoll_wait on a pipe, woken by a one-byte write. The two take
 * turns, sample by sample, so a change in the machine's load hits both.
 */
#include "bench.h"

#include <pthread.h>
#include <spindle/timer.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { SPACING_US = 100 };

typedef struct samples {
    double *lat_ns;
    long n;
    _Atomic uint64_t sent_ns; /* when the current sample was fired */
    _Atomic long done;        /* samples recorded */
    /* The woken thread's CPU time at the first and the last sample: it
     * does nothing but wake, record and sleep again, so the difference
     * over n - 1 is the CPU cost of one wake-up, whatever the delays. */
    double cpu_first, cpu_last;
} samples_t;

/* On the woken thread. */
static void record(samples_t *s)
{
    uint64_t now = sp_now_ns();
    long i = atomic_load(&s->done);
    s->lat_ns[i] = (double)(now - atomic_load(&s->sent_ns));
    if (i == 0)
        s->cpu_first = sb_thread_cpu_ns();
    else if (i == s->n - 1)
        s->cpu_last = sb_thread_cpu_ns();
    atomic_store(&s->done, i + 1);
}

/* Something to wake, and its samples. */
typedef struct target {
    samples_t s;
    bool (*fire)(void *ctx); /* wake it; false if that failed */
    void *ctx;
} target_t;

/* Fire n samples at each target, ~SPACING_US apart, taking turns; a target
 * is fired once its previous sample landed. */
static int drive(target_t *t, int k, long n)
{
    for (long i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) {
            sb_sleep_us(SPACING_US);
            while (atomic_load(&t[j].s.done) < i)
                sb_sleep_us(10);
            atomic_store(&t[j].s.sent_ns, sp_now_ns());
            if (!t[j].fire(t[j].ctx)) {
                sb_note("tickle: could not fire sample %ld", i);
                return 1;
            }
        }
    }
    for (int j = 0; j < k; j++)
        while (atomic_load(&t[j].s.done) < n)
            sb_sleep_us(10);
    return 0;
}

static int report(const char *what, samples_t *s, long n)
{
    if (atomic_load(&s->done) < n)
        return 1;
    char name[64];
    snprintf(name, sizeof name, "tickle.%s_p50", what);
    sb_report(name, sb_percentile(s->lat_ns, n, 50) / 1e3, "us");
    snprintf(name, sizeof name, "tickle.%s_p99", what);
    sb_report(name, sb_percentile(s->lat_ns, n, 99) / 1e3, "us");
    if (n > 1) {
        snprintf(name, sizeof name, "tickle.%s_cpu", what);
        sb_report(name, (s->cpu_last - s->cpu_first) / (double)(n - 1), "ns");
    }
    return 0;
}

/* ---- the IOManager ----------------------------------------------------- */

typedef struct iom_fire {
    sp_scheduler_t *sched;
    samples_t *s;
} iom_fire_t;

static void record_task(void *arg)
{
    record(arg);
}

static bool fire_task(void *ctx)
{
    iom_fire_t *f = ctx;
    return sp_schedule(f->sched, record_task, f->s, 0) == 0;
}

/* ---- the floor: epoll_wait on a pipe ----------------------------------- */

typedef struct epoll_floor {
    int ep, rd, wr;
    long n;
    samples_t *s;
} epoll_floor_t;

static void *epoll_thread(void *arg)
{
    epoll_floor_t *f = arg;
    for (long i = 0; i < f->n; i++) {
        struct epoll_event ev;
        if (epoll_wait(f->ep, &ev, 1, -1) != 1) {
            i--; /* EINTR */
            continue;
        }
        char c;
        if (syscall(SYS_read, f->rd, &c, 1) == 1)
            record(f->s);
    }
    return NULL;
}

static bool fire_pipe(void *ctx)
{
    epoll_floor_t *f = ctx;
    char c = 1;
    return syscall(SYS_write, f->wr, &c, 1) == 1;
}

/* The floor's pipe, epoll set and thread; 0 or -1. */
static int floor_start(epoll_floor_t *f, pthread_t *t)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    f->rd = p[0];
    f->wr = p[1];
    f->ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (f->ep >= 0 && epoll_ctl(f->ep, EPOLL_CTL_ADD, f->rd, &ev) == 0 &&
        pthread_create(t, NULL, epoll_thread, f) == 0)
        return 0;
    if (f->ep >= 0)
        close(f->ep);
    close(p[0]);
    close(p[1]);
    return -1;
}

static void floor_end(epoll_floor_t *f, pthread_t t)
{
    pthread_join(t, NULL);
    close(f->ep);
    close(f->rd);
    close(f->wr);
}

/* ------------------------------------------------------------------------- */

int sb_tickle(long n)
{
    target_t t[2] = {{.s.n = n, .fire = fire_task},
                     {.s.n = n, .fire = fire_pipe}};
    t[0].s.lat_ns = malloc(sizeof(double) * (size_t)n);
    t[1].s.lat_ns = malloc(sizeof(double) * (size_t)n);
    epoll_floor_t floor = {.n = n, .s = &t[1].s};
    pthread_t floor_thread;
    int bad = !t[0].s.lat_ns || !t[1].s.lat_ns ||
              floor_start(&floor, &floor_thread) < 0;
    if (!bad) {
        sb_note("tickle: %ld samples each ~%d us apart, schedule -> task "
                "start on a sleeping worker; floor: epoll_wait woken by a "
                "pipe write",
                n, SPACING_US);
        sp_iomanager_t *io = sb_iom_new("tickle", 1, false);
        iom_fire_t iom = {sp_iomanager_scheduler(io), &t[0].s};
        t[0].ctx = &iom;
        t[1].ctx = &floor;
        sb_sleep_ms(10); /* let both reach their epoll_wait */
        bad = drive(t, 2, n);
        bad |= sb_iom_end(io) < 0;
        if (bad) /* the floor thread still waits for its samples */
            for (long i = atomic_load(&t[1].s.done); i < n; i++)
                fire_pipe(&floor);
        floor_end(&floor, floor_thread);
        bad |= report("wake", &t[0].s, n);
        bad |= report("floor", &t[1].s, n);
    }
    free(t[0].s.lat_ns);
    free(t[1].s.lat_ns);
    return bad;
}
