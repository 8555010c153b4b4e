/* spindle task groups: run a batch of jobs on a scheduler with a
 * concurrency limit and dependencies, wait for them, and stop at the first
 * failure (xmake's co_group / runbatchjobs).
 *
 *   sp_group_t *g = sp_group_create(sched, "build", 8);
 *   int a = sp_group_add(g, compile, "a.c");
 *   int b = sp_group_add(g, compile, "b.c");
 *   int deps[] = {a, b};
 *   sp_group_add_after(g, link, "app", deps, 2);
 *   sp_group_failure_t f;
 *   if (sp_group_wait(g, SP_FOREVER, &f) == -ECANCELED) ... job f.job failed
 *   sp_group_destroy(g);
 *
 * Jobs start when the group is started (sp_group_start, or the first
 * sp_group_wait), so a graph can be built first; jobs added to a started
 * group start as soon as their dependencies and the limit allow. Each job
 * runs as a task (its own fiber) on the group's scheduler, on any worker.
 * Ready jobs start in the order they became ready, as many as the limit
 * allows, so the graph runs with the most concurrency it permits.
 *
 * Failure: a job fails by returning non-zero. The first failure (or
 * sp_group_cancel) cancels every job not started yet: they never run.
 * Jobs already running are interrupted (sp_fiber_interrupt with
 * ECANCELED, task.h): the wait they are in, or their next one, fails with
 * -ECANCELED. Code that waits without blocking calls may poll
 * sp_group_cancelled() instead.
 *
 * Deadlines: a group created inside a deadline scope (task.h) runs each
 * job inside that deadline.
 *
 * Dependencies form a DAG: an edge that would close a cycle is refused
 * with -EDEADLK when it is added, so a started group can never deadlock on
 * its own graph.
 *
 * Waiting follows sync.h: from a task fiber (timeouts need an IOManager)
 * or a plain thread. A job must not wait for its own group.
 *
 * Errors: 0 / ids >= 0, or a negative errno; create: NULL + errno. All
 * calls are thread-safe.
 */
#ifndef SPINDLE_GROUP_H
#define SPINDLE_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "spindle/scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_group sp_group_t;
/* A job: 0 = success; anything else is its failure code. */
typedef int (*sp_job_fn)(void *arg);

#define SP_GROUP_UNLIMITED 0

/* limit: most jobs running at once, >= 1, or SP_GROUP_UNLIMITED. name may
 * be NULL (copied, truncated to 31 bytes). EINVAL, ENOMEM. */
sp_group_t *sp_group_create(sp_scheduler_t *s, const char *name, int limit);
/* Cancel the jobs not started yet, wait for the running ones to finish
 * (as sp_group_wait, from a fiber or a thread; never from one of the
 * group's own jobs), then free the group. NULL is a no-op. */
void sp_group_destroy(sp_group_t *g);
const char *sp_group_name(const sp_group_t *g);

/* Add a job; returns its id (0, 1, 2... in order of adding). -ECANCELED
 * once the group failed or was cancelled, -EINVAL, -ENOMEM. */
int sp_group_add(sp_group_t *g, sp_job_fn fn, void *arg);
/* Add a job that starts only after every job in deps[0..ndeps) succeeded.
 * -EINVAL for an unknown id, otherwise as sp_group_add. */
int sp_group_add_after(sp_group_t *g, sp_job_fn fn, void *arg,
                       const int *deps, int ndeps);
/* Make job wait for dep as well. 0; -EDEADLK if dep already depends on
 * job (directly or not) or job == dep; -EBUSY if job has started; -EINVAL
 * for unknown ids; -ECANCELED; -ENOMEM. */
int sp_group_depend(sp_group_t *g, int job, int dep);

/* Start running jobs. 0, -EALREADY, -ECANCELED. */
int sp_group_start(sp_group_t *g);
/* Cancel every job not started yet and interrupt the running ones. 0, or
 * -EALREADY if the group had already failed or been cancelled. */
int sp_group_cancel(sp_group_t *g);
/* True once a job failed or the group was cancelled: for running jobs. */
bool sp_group_cancelled(sp_group_t *g);

typedef struct sp_group_failure {
    int job;  /* the first job that failed, or -1 for sp_group_cancel */
    int code; /* what it returned (0 for sp_group_cancel) */
} sp_group_failure_t;

/* Start the group if needed and wait until no job runs or can still run.
 * 0 when every job succeeded; -ECANCELED when a job failed or the group
 * was cancelled (then *failure, if not NULL, says which job and its code);
 * -ETIMEDOUT; -EPERM / -ENOTSUP as in sync.h. */
int sp_group_wait(sp_group_t *g, int64_t timeout_us,
                  sp_group_failure_t *failure);

typedef struct sp_group_progress {
    int total;     /* jobs added */
    int done;      /* succeeded + failed + cancelled: jobs that are over */
    int succeeded;
    int failed;
    int cancelled; /* never ran */
    int running;   /* started (or about to), not finished */
} sp_group_progress_t;

void sp_group_progress(sp_group_t *g, sp_group_progress_t *out);

#ifdef __cplusplus
}
#endif
#endif
