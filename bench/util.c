/* Shared helpers: clocks, reporting, /proc readers, scheduler setup. */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

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

void sb_report(const char *name, double value, const char *unit)
{
    /* Counts print as integers, measurements with two decimals. */
    if (value == (double)(long long)value)
        printf("%s %.0f %s\n", name, value, unit);
    else
        printf("%s %.2f %s\n", name, value, unit);
    fflush(stdout); /* keep figures in order with stderr notes */
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

void sb_sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ; /* EINTR: sleep the rest */
}

sp_scheduler_t *sb_sched_new(const char *name, int threads, bool use_caller)
{
    sp_scheduler_t *s = sp_scheduler_create(name, threads, use_caller);
    if (!s) {
        perror("sp_scheduler_create");
        exit(1);
    }
    int rc = sp_scheduler_start(s);
    if (rc < 0) {
        fprintf(stderr, "sp_scheduler_start: %s\n", strerror(-rc));
        exit(1);
    }
    return s;
}

int sb_sched_end(sp_scheduler_t *s)
{
    int rc = sp_scheduler_stop(s);
    if (rc < 0)
        sb_note("sp_scheduler_stop: %s", strerror(-rc));
    sp_scheduler_destroy(s);
    return rc;
}
