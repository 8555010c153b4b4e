/* Internal: logging, shared by log*.c.
 *
 * log.c          loggers, levels, the call path (format, then enqueue)
 * log_writer.c   the bounded queue, the writer thread, flush, fork, exit
 * log_appender.c appenders: console, file (reopen), callback; output buffers
 * log_pattern.c  patterns: compile, lay out one record
 * log_config.c   the "log" configuration section and variables
 *
 * Ownership rule: "writer state" (each logger's appender set, appender
 * output buffers, the default pattern, the time cache) is touched only by
 * whoever executes records: the writer thread, or after sp_log_shutdown()
 * the logging thread while it holds the queue lock. Everyone else changes
 * writer state by queueing a control record, which keeps changes in order
 * with the messages around them.
 */
#ifndef SP_LOG_INTERNAL_H
#define SP_LOG_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "spindle/log.h"

/* ---- growable byte buffer ----------------------------------------------- */

typedef struct sp__lbuf {
    char *data;
    size_t len, cap;
} sp__lbuf_t;

/* Append n bytes; false when memory ran out (the buffer is unchanged). */
bool sp__lbuf_put(sp__lbuf_t *b, const char *s, size_t n);

/* ---- records ------------------------------------------------------------ */

typedef struct sp__log_record sp__log_record_t;
typedef void (*sp_log_ctl_fn)(void *arg);

struct sp__log_record {
    sp__log_record_t *next;
    sp_log_ctl_fn ctl; /* a control record when set: ctl(ctl_arg) */
    void *ctl_arg;
    sp_logger_t *logger;
    int level;
    int line;
    const char *file;
    struct timespec ts; /* CLOCK_REALTIME */
    long tid;
    uint64_t fid;
    size_t size; /* bytes charged to the queue */
    size_t len;
    char msg[];
};

/* ---- patterns (log_pattern.c) ------------------------------------------- */

typedef struct sp__log_pattern sp__log_pattern_t;

/* NULL + reason in msg on a bad pattern (or out of memory). */
sp__log_pattern_t *sp__pattern_compile(const char *text, char *msg, size_t len);
void sp__pattern_free(sp__log_pattern_t *p);
/* Lay out one record at the end of `out`. Writer state: the pattern's
 * per-second time cache changes. */
bool sp__pattern_format(sp__log_pattern_t *p, const sp__log_record_t *r,
                        sp__lbuf_t *out);

/* ---- appenders (log_appender.c) ----------------------------------------- */

/* Write one record to an appender (buffered). Writer state. */
void sp__appender_emit(sp_log_appender_t *a, const sp__log_record_t *r);
/* Write out every buffered appender. Writer state. */
void sp__appenders_flush(void);
/* Reopen every file appender; 0 or the first -errno. Writer state. */
int sp__appenders_reopen(void);
void sp__appender_retain(sp_log_appender_t *a);
/* Replace the default pattern (owned). Writer state. */
void sp__appenders_set_default(sp__log_pattern_t *p);

/* Take (true) or release the appender list's lock, around fork(). */
void sp__appenders_hold(bool hold);
/* Makes a WARN record of the log about itself, on "spindle.log" (log.c
 * hands it down); NULL when out of memory. Writer state. */
typedef sp__log_record_t *(*sp__log_notice_fn)(const char *file, int line, const char *fmt,
                                              ...);
void sp__appenders_set_notice(sp__log_notice_fn fn);

/* An immutable set of appenders, holding a reference on each. */
typedef struct sp__log_appset {
    size_t n;
    sp_log_appender_t *a[];
} sp__log_appset_t;

sp__log_appset_t *sp__appset_new(sp_log_appender_t *const *apps, size_t n);
void sp__appset_free(sp__log_appset_t *s);

/* ---- loggers (log.c) ---------------------------------------------------- */

struct sp_logger {
    const char *name;
    sp_logger_t *parent; /* NULL for the root */
    sp_logger_t *next;   /* registry list, parents before children */
    _Atomic int level;     /* its own, or SP_LEVEL_INHERIT */
    _Atomic int effective; /* after inheritance, read by every log call */
    sp__log_appset_t *apps; /* writer state; NULL = inherit */
};

/* Make a record of a message; NULL when out of memory. */
sp__log_record_t *sp__log_record(sp_logger_t *lg, int level, const char *file,
                                int line, const char *fmt, va_list ap);

/* ---- the writer (log_writer.c) ------------------------------------------ */

/* What the writer needs of the loggers above it, handed over by log.c
 * before its first message: write a message record to its logger's
 * appenders, and take (true) or release the logger list's lock around
 * fork(). Control records the writer runs itself. */
typedef struct sp__log_writer_ops {
    void (*exec)(sp__log_record_t *r);
    void (*hold_loggers)(bool hold);
} sp__log_writer_ops_t;
void sp__log_writer_set_ops(const sp__log_writer_ops_t *ops);

/* Queue a message record (ownership passes). From a fiber it is dropped
 * when the queue is full; a plain thread waits for room. */
void sp__log_enqueue(sp__log_record_t *r);
/* Run fn(arg) as writer state, in order with queued messages, and wait for
 * it. 0 or -ENOMEM / -EDEADLK. */
int sp__log_control(sp_log_ctl_fn fn, void *arg);
/* True on the writer thread. */
bool sp__log_is_writer(void);

/* ---- what logging lost (log_stats.c) ------------------------------------ */

/* Count a message that was lost. */
void sp__log_drop(void);
/* Take and return the drop count not yet reported. */
uint64_t sp__log_take_unreported(void);
/* Count a failed write(2) (errno err) that lost `lines` lines. */
void sp__log_write_failed(uint64_t lines, int err);

#endif
