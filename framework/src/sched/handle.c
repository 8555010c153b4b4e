/* Tasks with handles (task.h): sp_go, references, and what runs when a
 * fiber finishes (its joiners: sync/join.c hooks on_done).
 *
 * A fiber's refs count its holders: the scheduler while it runs (or its
 * creator before), plus each handle. Whoever drops the last one frees it,
 * or the worker recycles it for the next function task; never while a
 * handle is held, so a stale handle can only see a finished fiber. */
#include <errno.h>
#include <string.h>

#include "scheduler_internal.h"
#include "spindle/task.h"

static void go_main(void *arg)
{
    struct sp_fiber *f = sp__thread()->current;
    f->result = f->go_fn(arg);
}

int sp_go(sp_scheduler_t *s, sp_task_fn fn, void *arg,
          const sp_task_opts_t *opts, sp_fiber_t **out)
{
    sp_task_opts_t none = {0};
    if (!opts)
        opts = &none;
    if (!s || !fn || (opts->bound && opts->worker < 0))
        return -EINVAL;
    struct sp_fiber *f = sp_fiber_create(go_main, arg, opts->stack_size,
                                         opts->name ? opts->name : "task");
    if (!f)
        return -errno;
    f->go_fn = fn;
    f->deadline_ns = sp__thread()->current->deadline_ns; /* inherited */
    if (out) /* the handle's, taken before the task can run and finish */
        atomic_store(&f->refs, 2);
    int rc = sp_schedule_fiber(s, f, opts->bound ? opts->worker : SP_ANY_WORKER);
    if (rc < 0) {
        sp_fiber_destroy(f);
        return rc;
    }
    if (out)
        *out = f;
    return 0;
}

void sp_fiber_ref(sp_fiber_t *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void sp_fiber_unref(sp_fiber_t *f)
{
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
        sp_fiber_destroy(f);
}

void sp__fiber_on_done(struct sp_fiber *f, sp__done_hook_t *h, bool *finished)
{
    sp__spin_lock(&f->done_lock);
    *finished = f->finished;
    if (!*finished) {
        sp__list_push_back(&f->on_done, &h->link);
        h->linked = true;
    }
    sp__spin_unlock(&f->done_lock);
}

bool sp__fiber_is_finished(struct sp_fiber *f)
{
    sp__spin_lock(&f->done_lock);
    bool done = f->finished;
    sp__spin_unlock(&f->done_lock);
    return done;
}

void sp__fiber_on_done_cancel(struct sp_fiber *f, sp__done_hook_t *h)
{
    sp__spin_lock(&f->done_lock);
    if (h->linked) {
        sp__list_remove(&f->on_done, &h->link);
        h->linked = false;
    }
    sp__spin_unlock(&f->done_lock);
}

void sp__fiber_finished(struct sp_fiber *f)
{
    for (;;) {
        sp__spin_lock(&f->done_lock);
        f->finished = true;
        sp__link_t *l = f->on_done.head;
        sp__done_hook_t *h = l ? sp__list_entry(l, sp__done_hook_t, link) : NULL;
        bool claimed = false;
        if (h) {
            sp__list_remove(&f->on_done, l);
            h->linked = false;
            claimed = h->claim(h);
        }
        sp__spin_unlock(&f->done_lock);
        if (!h)
            return;
        if (claimed)
            h->deliver(h);
    }
}
