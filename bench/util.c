/* Shared helpers: clocks, reporting, /proc readers, sockets, scheduler and
 * IOManager setup. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

double sb_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static double tv_seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

double sb_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return tv_seconds(ru.ru_utime) + tv_seconds(ru.ru_stime);
}

double sb_best_of(sb_run_fn run, long iters, int reps)
{
    double best = run(iters);
    for (int i = 1; i < reps; i++) {
        double ns = run(iters);
        if (ns < best)
            best = ns;
    }
    return best;
}

double sb_thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int sb_best_of_each(sb_run_ctx_fn run, void *const ctx[], int k, long iters,
                    int reps, sb_best_t best[])
{
    for (int j = 0; j < k; j++)
        best[j] = (sb_best_t){-1, -1};
    for (int i = 0; i < reps; i++) {
        for (int j = 0; j < k; j++) {
            double cpu0 = sb_thread_cpu_ns();
            double ns = run(ctx[j], iters);
            double cpu = sb_thread_cpu_ns() - cpu0;
            if (ns < 0)
                return -1;
            if (best[j].wall_ns < 0 || ns < best[j].wall_ns)
                best[j].wall_ns = ns;
            if (best[j].cpu_ns < 0 || cpu < best[j].cpu_ns)
                best[j].cpu_ns = cpu;
        }
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sb_percentile(double *v, long n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    long rank = (long)(p / 100.0 * (double)n + 0.999999); /* 1-based */
    if (rank < 1)
        rank = 1;
    return v[(rank > n ? n : rank) - 1];
}

void sb_report(const char *name, double value, const char *unit)
{
    /* Counts print as integers, measurements with two decimals. */
    if (value == (double)(long long)value)
        printf("%s %.0f %s\n", name, value, unit);
    else
        printf("%s %.2f %s\n", name, value, unit);
    fflush(stdout); /* keep figures in order with stderr notes */
}

void sb_report_best(const char *prefix, const char *name, const sb_best_t *b,
                    double per, const sb_best_t *ref, const char *ref_name)
{
    char fig[128];
    snprintf(fig, sizeof fig, "%s.%s", prefix, name);
    sb_report(fig, b->wall_ns / per, "ns");
    snprintf(fig, sizeof fig, "%s.%s_cpu", prefix, name);
    sb_report(fig, b->cpu_ns / per, "ns");
    if (!ref)
        return;
    snprintf(fig, sizeof fig, "%s.%s_vs_%s", prefix, name, ref_name);
    sb_report(fig, b->wall_ns / ref->wall_ns, "x");
    snprintf(fig, sizeof fig, "%s.%s_vs_%s_cpu", prefix, name, ref_name);
    sb_report(fig, b->cpu_ns / ref->cpu_ns, "x");
}

void sb_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

long sb_status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kib = strtol(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

long sb_map_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    long n = 0;
    int c;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

long sb_file_long(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

void sb_sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&t, &t) != 0)
        ; /* EINTR: sleep the rest */
}

void sb_sleep_ms(long ms)
{
    sb_sleep_us(ms * 1000);
}

int sb_socketpair(int sv[2], bool nonblock)
{
    if (socketpair(AF_UNIX, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0,
                   sv) == 0)
        return 0;
    sb_note("socketpair: %s", strerror(errno));
    return -1;
}

bool sb_fd_kernel_nonblock(int fd)
{
    long fl = syscall(SYS_fcntl, fd, F_GETFL);
    return fl >= 0 && (fl & O_NONBLOCK);
}

bool sb_raw_write1(int fd)
{
    char c = 1;
    return syscall(SYS_write, fd, &c, 1) == 1;
}

bool sb_raw_read1(int fd)
{
    char c;
    return syscall(SYS_read, fd, &c, 1) == 1;
}

/* Creation or start failed: nothing to measure, say why and exit. */
static void must(bool ok, const char *what, int err)
{
    if (ok)
        return;
    fprintf(stderr, "%s: %s\n", what, strerror(err));
    exit(1);
}

/* A failed stop is reported, not fatal: the figures may still stand. */
static int stopped(int rc, const char *what)
{
    if (rc < 0)
        sb_note("%s: %s", what, strerror(-rc));
    return rc;
}

/* Start a created scheduler (an IOManager's too). */
static void start(sp_scheduler_t *s)
{
    int rc = sp_scheduler_start(s);
    must(rc == 0, "sp_scheduler_start", -rc);
}

sp_scheduler_t *sb_sched_new(const char *name, int threads, bool use_caller)
{
    sp_scheduler_t *s = sp_scheduler_create(name, threads, use_caller);
    must(s != NULL, "sp_scheduler_create", errno);
    start(s);
    return s;
}

int sb_sched_end(sp_scheduler_t *s)
{
    int rc = stopped(sp_scheduler_stop(s), "sp_scheduler_stop");
    sp_scheduler_destroy(s);
    return rc;
}

sp_iomanager_t *sb_iom_new(const char *name, int threads, bool use_caller)
{
    sp_iomanager_t *io = sp_iomanager_create(name, threads, use_caller);
    must(io != NULL, "sp_iomanager_create", errno);
    start(sp_iomanager_scheduler(io));
    return io;
}

int sb_iom_end(sp_iomanager_t *io)
{
    int rc = stopped(sp_iomanager_stop(io), "sp_iomanager_stop");
    sp_iomanager_destroy(io);
    return rc;
}

int sb_iom_run(const char *name, sp_fiber_fn fn, void *args, size_t arg_size,
               long ntasks)
{
    sp_iomanager_t *io = sb_iom_new(name, 1, true);
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    int rc = 0;
    for (long i = 0; i < ntasks && rc == 0; i++)
        rc = sp_schedule(s, fn, (char *)args + (size_t)i * arg_size, 0);
    if (rc < 0)
        sb_note("%s: sp_schedule: %s", name, strerror(-rc));
    return sb_iom_end(io) < 0 || rc < 0;
}
