/* spindle-bench: helpers shared by every benchmark (and by the C++ boost
 * comparison, hence the extern "C" block).
 *
 * Output contract: every figure is one stdout line `name value unit`, so a
 * script can grep or diff runs; anything else (progress, failures) goes to
 * stderr. */
#ifndef SPINDLE_BENCH_H
#define SPINDLE_BENCH_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One timed run of `iters` repetitions; returns the elapsed nanoseconds. */
typedef double (*sb_run_fn)(long iters);
/* The same with the benchmark's own state; negative on failure. */
typedef double (*sb_run_ctx_fn)(void *ctx, long iters);

/* Monotonic clock in nanoseconds. */
double sb_now_ns(void);
/* User + system CPU time of the whole process, in seconds. */
double sb_cpu_seconds(void);
/* The smallest elapsed time of `reps` runs: the run least disturbed by
 * interrupts and other processes is the closest to the true cost. */
double sb_best_of(sb_run_fn run, long iters, int reps);
/* CPU time of the calling thread in nanoseconds: unlike the wall clock,
 * it does not count the time other processes had the CPU. */
double sb_thread_cpu_ns(void);

/* The best wall time a run reported, and the least CPU time the calling
 * thread spent in a run (setup included); on a shared machine the second
 * is the steadier figure for work that never sleeps. */
typedef struct sb_best {
    double wall_ns, cpu_ns;
} sb_best_t;
/* Several variants of one benchmark, taking turns so that a disturbance
 * hits them alike: `reps` rounds of run(ctx[j], iters) for j = 0..k-1,
 * the best of each variant in best[j]. A run returning a negative value
 * failed: stops and returns -1; else 0. */
int sb_best_of_each(sb_run_ctx_fn run, void *const ctx[], int k, long iters,
                    int reps, sb_best_t best[]);
/* Print a variant's best per repetition (ns, `per` repetitions a run) as
 * PREFIX.NAME (wall) and PREFIX.NAME_cpu, and with a reference variant
 * the ratios PREFIX.NAME_vs_REFNAME and PREFIX.NAME_vs_REFNAME_cpu. */
void sb_report_best(const char *prefix, const char *name, const sb_best_t *b,
                    double per, const sb_best_t *ref, const char *ref_name);
/* The p-th percentile (0..100, nearest rank) of n values; sorts v. */
double sb_percentile(double *v, long n, double p);

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
void sb_sleep_us(long us);

/* A connected AF_UNIX stream socketpair, non-blocking or not; 0, or -1
 * with a note. Blocking pairs are what the hooks manage inside fibers. */
int sb_socketpair(int sv[2], bool nonblock);
/* True when the kernel has O_NONBLOCK on fd: the sign that the hooks
 * took over a socket the program created blocking. */
bool sb_fd_kernel_nonblock(int fd);
/* One byte through fd with the raw system calls (no hooks): true when
 * exactly one byte moved. */
bool sb_raw_write1(int fd);
bool sb_raw_read1(int fd);

/* The C++ translation unit (only built when Boost.Context is found). */
double sb_boost_fiber_run(long round_trips);
double sb_boost_fcontext_run(long round_trips);

#ifdef __cplusplus
}

/* Scheduler helpers: C only, the C++ part never touches the scheduler. */
#else
#include <spindle/iomanager.h>
#include <spindle/scheduler.h>

/* Create and start a scheduler, or print why not and exit: a benchmark
 * without its scheduler has nothing to measure. */
sp_scheduler_t *sb_sched_new(const char *name, int threads, bool use_caller);
/* Stop and free; 0 or the negative errno from stop. */
int sb_sched_end(sp_scheduler_t *s);

/* The same for an IOManager. */
sp_iomanager_t *sb_iom_new(const char *name, int threads, bool use_caller);
int sb_iom_end(sp_iomanager_t *io);
/* Run `ntasks` tasks fn(args + i * arg_size) on a fresh IOManager of one
 * worker that is the calling thread (use_caller), so they all share one
 * thread and one libev loop; returns once every task has finished. With
 * arg_size 0 every task gets `args`. 0, or 1 if a task could not be
 * scheduled or stop failed. */
int sb_iom_run(const char *name, sp_fiber_fn fn, void *args, size_t arg_size,
               long ntasks);

/* The benchmarks, one per subcommand; `arg` is the optional count (or
 * seconds for idle). Each returns 0, or 1 when it could not measure. */
int sb_switch(long round_trips);
int sb_spawn(long tasks);
int sb_parked(long fibers);
int sb_dump(long fibers);
int sb_wake(long round_trips);
int sb_interrupt(long round_trips);
int sb_idle(long seconds);
int sb_pingpong(long round_trips);
int sb_timers(long timers);
int sb_tickle(long samples);
int sb_sleepers(long fibers);
int sb_lateness(long fibers);
int sb_hooked_rw(long pairs);
int sb_sync(long iterations);
int sb_monitor(long yields);
#endif

#endif
