/* spindle debugging: a dump of every live fiber, like Go's goroutine dump.
 *
 * For each fiber that is not finished (pooled task fibers waiting for work
 * are left out): its id, name, state (running, runnable, parked,
 * suspended), what a parked fiber waits on (fd and direction, with the
 * peer address of a socket; sleep; mutex, cond, rwlock, sem, wait group,
 * channel, group, join; sp_park; sp_run_blocking), the worker it last ran
 * on, its age, how long its current wait has lasted, its stack use, and a
 * backtrace of every fiber that is not running, taken from its saved
 * context by DWARF unwinding (libunwind; in builds without it, by walking
 * frame pointers). Fibers with the same state, wait kind and backtrace are
 * grouped into one entry with their count.
 *
 * Symbols come from dladdr(): names of functions a shared object or an
 * executable linked with -rdynamic exports; others (static functions, a
 * plain executable's) print as module+offset, for addr2line. Without
 * libunwind, frames of code built without frame pointers end the walk
 * early. The dump may run while fibers run: a fiber that resumes during it
 * may show a cut-short backtrace, never a fault. Details:
 * docs/observability.md, "Fiber dumps".
 */
#ifndef SPINDLE_DEBUG_H
#define SPINDLE_DEBUG_H

#include <stdio.h>

#include "spindle/log.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SP_DUMP_JSON = 1u << 0,   /* one JSON object instead of text */
    SP_DUMP_NO_STACK = 1u << 1 /* no backtraces (group by state and wait) */
};

/* Write a dump of every live fiber to out (text, or JSON with
 * SP_DUMP_JSON). Callable from any thread or fiber. Returns the number of
 * fibers listed, or -ENOMEM / -EIO. */
int sp_fibers_dump(FILE *out, unsigned flags);

/* Live fibers by state, and the stack memory they have touched. */
typedef struct sp_fibers_count {
    size_t running, runnable, parked, suspended;
    size_t stack_bytes; /* stack pages committed, all listed fibers */
} sp_fibers_count_t;

/* Count the fibers a dump would list (a walk of the registry; the stack
 * bytes ask the kernel once per fiber, so this is for a scrape, not a hot
 * path). 0 or -ENOMEM. */
int sp_fibers_count(sp_fibers_count_t *out);

/* Make signal signo (e.g. SIGQUIT) write a text dump to fd (e.g. 2): the
 * handler only writes a byte to a pipe; a thread of the library's makes
 * the dump. One signal per process; 0, -EALREADY if one is installed, or
 * -errno. The signal's previous disposition is replaced. */
int sp_fibers_dump_on_signal(int signo, int fd);

/* The text dump through logger lg (NULL: "spindle.fibers") at level: one
 * record for the heading and one per group of fibers, so a dump of many
 * kinds of stacks is many ordinary-sized records, each taken or lost whole
 * by the log's queue. Nothing is made when lg does not log at level.
 * Returns what sp_fibers_dump does, 0 when filtered out. */
int sp_fibers_dump_to_log(sp_logger_t *lg, sp_log_level_t level);

/* sp_fibers_dump_on_signal, with each dump made by sp_fibers_dump_to_log. */
int sp_fibers_dump_on_signal_to_log(int signo, sp_logger_t *lg, sp_log_level_t level);

#ifdef __cplusplus
}
#endif

#endif
