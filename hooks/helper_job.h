/* A call run on a helper thread (sp_run_blocking) on behalf of a fiber:
 * the lookups (lookup.h) and the offloaded file calls (file_offload.c).
 *
 * An interrupt or a deadline (task.h) may end the fiber's wait while the
 * helper still works: the helper then must not touch the caller's frame,
 * which is gone. So each call is a job of its own, with copies of what it
 * needs, held by the caller and by the helper; whichever lets go last
 * frees it. */
#ifndef SP_HOOK_HELPER_JOB_H
#define SP_HOOK_HELPER_JOB_H

#include <stdatomic.h>

#include "hook_internal.h"

typedef struct sp__job sp__job_t;
struct sp__job {
    _Atomic int refs;
    void (*run)(sp__job_t *j);  /* on the helper */
    void (*free)(sp__job_t *j); /* by whoever lets go last */
};

void sp__job_unref(sp__job_t *j);

/* Run j on a helper. 0 with j's answer to read (the caller's reference
 * still held), or -1 with errno set (the interrupt's, or why no helper
 * took it): j is then given up. */
int sp__job_run(const sp__hook_bridge_t *b, sp__job_t *j);

#endif
