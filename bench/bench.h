/* spindle-bench: helpers shared by every benchmark (and by the C++ boost
 * comparison, hence the extern "C" block).
 *
 * Output contract: every figure is one stdout line `name value unit`, so a
 * script can grep or diff runs; anything else (progress, failures) goes to
 * stderr. */
#ifndef SPINDLE_BENCH_H
#define SPINDLE_BENCH_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One timed run of `iters` repetitions; returns the elapsed nanoseconds. */
typedef double (*sb_run_fn)(long iters);

/* Monotonic clock in nanoseconds. */
double sb_now_ns(void);
/* User + system CPU time of the whole process, in seconds. */
double sb_cpu_seconds(void);
/* The smallest elapsed time of `reps` runs: the run least disturbed by
 * interrupts and other processes is the closest to the true cost. */
double sb_best_of(sb_run_fn run, long iters, int reps);

/* Print one figure as `name value unit`. */
void sb_report(const char *name, double value, const char *unit);
/* Print a note (context, failures) on stderr. */
void sb_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A `Key:` line of /proc/self/status in KiB (VmRSS, VmPTE...), or -1. */
long sb_status_kib(const char *key);
/* Number of memory mappings of this process (lines of /proc/self/maps),
 * or -1. */
long sb_map_count(void);
/* The first number in a file (a /proc/sys knob), or -1. */
long sb_file_long(const char *path);
void sb_sleep_ms(long ms);

/* The C++ translation unit (only built when Boost.Context is found). */
double sb_boost_fiber_run(long round_trips);
double sb_boost_fcontext_run(long round_trips);

#ifdef __cplusplus
}

/* Scheduler helpers: C only, the C++ part never touches the scheduler. */
#else
#include <spindle/scheduler.h>

/* Create and start a scheduler, or print why not and exit: a benchmark
 * without its scheduler has nothing to measure. */
sp_scheduler_t *sb_sched_new(const char *name, int threads, bool use_caller);
/* Stop and free; 0 or the negative errno from stop. */
int sb_sched_end(sp_scheduler_t *s);

/* The benchmarks, one per subcommand; `arg` is the optional count (or
 * seconds for idle). Each returns 0, or 1 when it could not measure. */
int sb_switch(long round_trips);
int sb_spawn(long tasks);
int sb_parked(long fibers);
int sb_wake(long round_trips);
int sb_idle(long seconds);
#endif

#endif
