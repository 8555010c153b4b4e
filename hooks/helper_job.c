/* Jobs on the helper pool (helper_job.h). */
#include "helper_job.h"

#include <errno.h>

void sp__job_unref(sp__job_t *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1)
        j->free(j);
}

static void run_job(void *p)
{
    sp__job_t *j = p;
    j->run(j);
    sp__job_unref(j);
}

int sp__job_run(const sp__hook_bridge_t *b, sp__job_t *j)
{
    atomic_init(&j->refs, 2);
    int rc = b->run_blocking(run_job, j);
    if (rc == 0)
        return 0;
    if (rc > -SP_HOOK_INTERRUPTED) /* no helper: run_job never ran */
        atomic_store(&j->refs, 1);
    sp__job_unref(j);
    errno = rc <= -SP_HOOK_INTERRUPTED ? -rc - SP_HOOK_INTERRUPTED : -rc;
    return -1;
}
