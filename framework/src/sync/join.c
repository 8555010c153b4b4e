/* sp_fiber_join (sync.h): a wait (sync_internal.h) that the finishing
 * fiber's worker claims through a hook on the fiber (sched/handle.c). */
#include <errno.h>
#include <stddef.h>

#include "sync_internal.h"

typedef struct joiner {
    sp__done_hook_t hook;
    sp__wait_t wait;
} joiner_t;

static joiner_t *joiner_of(sp__done_hook_t *h)
{
    return (joiner_t *)(void *)((char *)h - offsetof(joiner_t, hook));
}

static bool claim(sp__done_hook_t *h)
{
    return sp__wait_claim(&joiner_of(h)->wait, NULL, 0);
}

static void deliver(sp__done_hook_t *h)
{
    sp__wait_deliver(&joiner_of(h)->wait);
}

int sp_fiber_join(struct sp_fiber *f, int64_t timeout_us, int *result)
{
    if (!f || !f->sched)
        return -EINVAL;
    if (f == sp__thread()->current)
        return -EDEADLK;
    joiner_t j = {.hook = {.claim = claim, .deliver = deliver}};
    int rc = 0;
    if (!sp__fiber_is_finished(f)) {
        if (timeout_us == 0)
            return -ETIMEDOUT;
        if ((rc = sp__wait_begin(&j.wait, timeout_us, SP__WAIT_JOIN)) < 0)
            return rc;
        bool finished;
        sp__fiber_on_done(f, &j.hook, &finished);
        if (!finished) {
            rc = sp__wait_block(&j.wait);
            sp__fiber_on_done_cancel(f, &j.hook);
        }
        sp__wait_end(&j.wait);
    }
    if (rc == 0 && result)
        *result = f->result;
    return rc;
}
