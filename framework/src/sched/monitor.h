/* Internal: the blocking-code monitor's thread (monitor.c), apart from the
 * scheduler it watches. It sees the workers only through the host below,
 * which the scheduler fills in (scheduler_monitor.c): samples of what each
 * worker runs, and the few things the monitor may do about a stuck one.
 * It does not call the scheduler otherwise.
 */
#ifndef SP_MONITOR_H
#define SP_MONITOR_H

#include <stdbool.h>
#include <stdint.h>

#include "spindle/scheduler.h"

typedef struct sp__monitor_host {
    void *ctx;         /* the scheduler, passed to every call */
    const char *name;  /* for the log */
    int nbase;         /* base workers; slots from nbase on are extras */
    /* Worker slots in use (base workers plus running extras). */
    int (*nlive)(void *ctx);
    /* Workers flagged stuck. */
    int (*nstuck)(void *ctx);
    /* Worker i's run sequence: odd while a task runs, +2 per task. */
    uint64_t (*run_seq)(void *ctx, int i);
    /* The id and name of the fiber worker i runs, if it is still on task
     * `seq` (else false: the fiber may be gone). */
    bool (*read_task)(void *ctx, int i, uint64_t seq, uint64_t *fid,
                      char name[33]);
    /* Flag worker i stuck (others take its queued work), or clear it. */
    void (*set_stuck)(void *ctx, int i, bool stuck);
    /* Wake every sleeping worker but `except`, to take a stuck one's work. */
    void (*rouse)(void *ctx, int except);
    /* Start extra worker i (== nlive); 0 or -errno. */
    int (*spawn)(void *ctx, int i);
    /* Ask extra worker i (the last) to retire. */
    void (*retire)(void *ctx, int i);
    /* If retiring worker i has left: join it, free its slot, true. */
    bool (*reap)(void *ctx, int i);
} sp__monitor_host_t;

typedef struct sp__monitor sp__monitor_t;

/* NULL if out of memory. */
sp__monitor_t *sp__monitor_new(void);
/* Set the options (validated by the caller), for up to `slots` workers and
 * at most `max_threads` of them live. Not while it runs. 0 or -ENOMEM. */
int sp__monitor_configure(sp__monitor_t *m, const sp_monitor_opts_t *o,
                          int max_threads, int slots);
/* Start the thread, which watches `host` (copied) until stop. 0 or -errno. */
int sp__monitor_start(sp__monitor_t *m, const sp__monitor_host_t *host);
/* Stop and join the thread (if it runs), after one last sample. */
void sp__monitor_stop(sp__monitor_t *m);
void sp__monitor_destroy(sp__monitor_t *m);
/* Its counts: stalls, grown, shrunk (the rest is the scheduler's). */
void sp__monitor_counts(const sp__monitor_t *m, sp_monitor_stats_t *out);

#endif
