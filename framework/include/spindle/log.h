/* spindle logging: levels, named loggers with inheritance, appenders, a
 * line pattern, and a background writer so that logging never blocks a
 * fiber's worker on disk I/O.
 *
 * Loggers are named with dots. "http.access" inherits its level and its
 * appenders from "http", which inherits from the root logger, unless they
 * are set on it. A logger that has appenders writes only to them (it does
 * not also write to its parent's).
 *
 * A log call checks the level first (one atomic load: a disabled level
 * costs almost nothing, and the SP_LOG_* macros do not even evaluate their
 * arguments), then formats the message in the caller and hands it to one
 * writer thread through a bounded queue. The writer lays out each line with
 * the appender's pattern and writes it. When the queue is full:
 *   - a call from a fiber drops the message and counts it (sp_log_dropped);
 *     blocking would stall every fiber of that worker behind the disk. The
 *     writer later logs "N messages dropped" at WARN on "spindle.log".
 *   - a call from a plain thread waits for room: nothing is lost.
 * A line the writer cannot write (disk full, file size limit, I/O error)
 * is lost, never written in part: a write that stops inside a line of a
 * regular file is taken back (truncated) to the last whole line. Once a
 * write to that appender works again, it first says "N log lines lost
 * (reason)" at WARN on "spindle.log". sp_log_stats() counts all of it.
 * sp_log_flush() waits until everything logged before it is written;
 * sp_log_shutdown() flushes and stops the writer and runs at exit on its own.
 * A FATAL message is flushed before the call returns.
 *
 * The queue is drained before fork() (pthread_atfork), so a child starts
 * with an empty queue and starts its own writer when it first logs.
 *
 * Pattern syntax (see docs/config.md): %d or %d{strftime format} local time,
 * %q milliseconds (000-999), %Q microseconds (000000-999999), %p level,
 * %c logger name, %t thread id, %F fiber id (0 outside fibers), %f source
 * file (no directories), %l line, %m message, %n newline, %% a percent.
 * An item may carry a width: %-5p pads on the right, %5p on the left.
 *
 * Errors: 0 or a negative errno; constructors return NULL and set errno.
 */
#ifndef SPINDLE_LOG_H
#define SPINDLE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle/config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sp_log_level {
    SP_LEVEL_TRACE,
    SP_LEVEL_DEBUG,
    SP_LEVEL_INFO,
    SP_LEVEL_WARN,
    SP_LEVEL_ERROR,
    SP_LEVEL_FATAL,
    SP_LEVEL_OFF,    /* as a logger's level: nothing passes */
    SP_LEVEL_INHERIT /* as a logger's level: use the parent's */
} sp_log_level_t;

/* The pattern used when none is given. */
#define SP_LOG_DEFAULT_PATTERN "%d{%Y-%m-%d %H:%M:%S}.%q %-5p %c [%t/%F] %f:%l %m%n"

typedef struct sp_logger sp_logger_t;
typedef struct sp_log_appender sp_log_appender_t;

/* ---- loggers ------------------------------------------------------------- */

/* The logger called `name`, created (with its parents) on first use and
 * kept for the life of the process. NULL, "" and "root" give the root.
 * Look loggers up once and keep the pointer. NULL + errno (EINVAL for a bad
 * name, ENOMEM). */
sp_logger_t *sp_logger(const char *name);
sp_logger_t *sp_log_root(void);
const char *sp_logger_name(const sp_logger_t *lg);

/* Set a logger's own level, or SP_LEVEL_INHERIT (not for the root). Takes
 * effect at once, for its descendants too. 0 or -EINVAL. */
int sp_logger_set_level(sp_logger_t *lg, sp_log_level_t level);
/* The level in force (after inheritance). */
sp_log_level_t sp_logger_level(const sp_logger_t *lg);
/* Whether a message at `level` would be written; lg NULL = root. */
bool sp_log_enabled(const sp_logger_t *lg, sp_log_level_t level);

/* Make these n appenders the logger's (taking a reference on each), or with
 * apps == NULL let it inherit its parent's again (not for the root). n == 0
 * with apps != NULL silences it. Messages logged before the call still go
 * to the appenders in force when they were logged. 0, -EINVAL, -ENOMEM. */
int sp_logger_set_appenders(sp_logger_t *lg, sp_log_appender_t *const *apps,
                            size_t n);

/* ---- appenders ----------------------------------------------------------- */

/* Each takes a pattern (NULL: the default pattern, which can change with
 * sp_log_set_pattern) and returns an appender holding one reference, or
 * NULL + errno (EINVAL for a bad pattern, open(2) errors, ENOMEM). */
sp_log_appender_t *sp_log_stdout(const char *pattern);
sp_log_appender_t *sp_log_stderr(const char *pattern);
/* Appends to `path` (created 0644). sp_log_reopen() reopens it by name, for
 * log rotation. */
sp_log_appender_t *sp_log_file(const char *path, const char *pattern);
/* Calls fn(line, len, arg) on the writer thread for each formatted line
 * (NUL-terminated too; for tests, syslog bridges...). fn must not log:
 * messages from the writer thread are dropped. */
typedef void (*sp_log_sink_fn)(const char *line, size_t len, void *arg);
sp_log_appender_t *sp_log_callback(sp_log_sink_fn fn, void *arg,
                                   const char *pattern);
/* Drop a reference; the last one closes the appender. NULL is a no-op. */
void sp_log_appender_release(sp_log_appender_t *a);

/* ---- writing ------------------------------------------------------------- */

/* Log unconditionally (the macros check the level first). lg NULL = root.
 * `file` must outlive the process (use __FILE__). */
void sp_log_write(sp_logger_t *lg, sp_log_level_t level, const char *file,
                  int line, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
void sp_log_vwrite(sp_logger_t *lg, sp_log_level_t level, const char *file,
                   int line, const char *fmt, va_list ap);

#define SP_LOG(lg, level, ...)                                                 \
    do {                                                                       \
        sp_logger_t *sp_log_lg_ = (lg);                                        \
        if (sp_log_enabled(sp_log_lg_, (level)))                               \
            sp_log_write(sp_log_lg_, (level), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#define SP_LOG_TRACE(lg, ...) SP_LOG(lg, SP_LEVEL_TRACE, __VA_ARGS__)
#define SP_LOG_DEBUG(lg, ...) SP_LOG(lg, SP_LEVEL_DEBUG, __VA_ARGS__)
#define SP_LOG_INFO(lg, ...) SP_LOG(lg, SP_LEVEL_INFO, __VA_ARGS__)
#define SP_LOG_WARN(lg, ...) SP_LOG(lg, SP_LEVEL_WARN, __VA_ARGS__)
#define SP_LOG_ERROR(lg, ...) SP_LOG(lg, SP_LEVEL_ERROR, __VA_ARGS__)
#define SP_LOG_FATAL(lg, ...) SP_LOG(lg, SP_LEVEL_FATAL, __VA_ARGS__)

/* ---- the writer ---------------------------------------------------------- */

/* Wait until every message logged before the call is written. Blocks the
 * caller (a fiber's whole worker too: call it at shutdown or rarely).
 * 0, or -EDEADLK on the writer thread (from a callback appender). */
int sp_log_flush(void);
/* Reopen every file appender by its path (after a rotation renamed the
 * file), in order with the messages around the call, and wait for it.
 * 0, or the first -errno (that appender keeps its old file). Not
 * async-signal-safe: call it from a normal context on SIGHUP. */
int sp_log_reopen(void);
/* Flush and stop the writer thread; later messages are written directly by
 * the calling thread. Registered with atexit() when the writer starts. */
void sp_log_shutdown(void);
/* Messages dropped because the queue was full (or memory ran out). */
uint64_t sp_log_dropped(void);

/* What logging lost since the process started. */
typedef struct sp_log_stats {
    uint64_t dropped;      /* messages never queued: sp_log_dropped() */
    uint64_t lost;         /* lines a failed write(2) kept out of a file or
                              console (counted once per appender) */
    uint64_t write_errors; /* write(2) calls that failed */
    int last_error;        /* errno of the last failure; 0: none yet */
} sp_log_stats_t;
/* From any thread; each field is read on its own (not a snapshot). 0. */
int sp_log_stats(sp_log_stats_t *out);
/* Bytes of formatted messages the queue may hold (default 4 MiB, at least
 * 4 KiB). 0 or -EINVAL. */
int sp_log_set_queue_size(size_t bytes);
/* Replace the default pattern (used by appenders created without one).
 * 0, -EINVAL (bad pattern, reason in msg if not NULL), -ENOMEM. */
int sp_log_set_pattern(const char *pattern, char *msg, size_t len);

/* ---- levels and configuration -------------------------------------------- */

/* "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF". */
const char *sp_log_level_name(sp_log_level_t level);
/* Case-insensitive; also accepts "warning". 0 or -EINVAL. */
int sp_log_level_parse(const char *name, sp_log_level_t *out);

/* Configure logging from `cfg` (NULL: the global registry): declares
 * log.level, log.pattern and log.queue_size and the section "log" holding
 * appenders, root and loggers (docs/config.md). Call it before the first
 * sp_config_load(); every successful load then reconfigures logging
 * atomically. Once per process: 0, -EEXIST (already done), -ENOMEM. */
int sp_log_use_config(sp_config_t *cfg);

#ifdef __cplusplus
}
#endif
#endif
