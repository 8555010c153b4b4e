/* The framework's side of the hooks: the per-thread switch, the connect
 * timeout, and the bridge table handed to the hook layer. */
#include <stdatomic.h>

#include "hook_bridge.h"
#include "iomanager_internal.h"
#include "sched/scheduler_internal.h"
#include "spindle/hook.h"
#include "spindle/timer.h"

static _Atomic int64_t connect_timeout_us = 75 * 1000000LL;

void sp_hook_enable(bool on)
{
    sp__thread()->hooks_off = !on;
}

/* Whether a hooked call on thread t may park. */
static inline bool hooks_on(const sp__thread_t *t)
{
    if (!t || t->hooks_off || !t->worker)
        return false;
    const sp__worker_t *w = t->worker;
    return w->s->has_io && t->current->sched; /* the root fiber has none */
}

bool sp_hook_is_enabled(void)
{
    return hooks_on(sp__thread_peek());
}

void sp_hook_set_connect_timeout(int64_t timeout_us)
{
    atomic_store(&connect_timeout_us, timeout_us < 0 ? -1 : timeout_us);
}

int64_t sp_hook_connect_timeout(void)
{
    return atomic_load(&connect_timeout_us);
}

/* Every hooked call on a socket starts here: one call that checks the
 * switch, finds the fd's entry and reads its flags, all inline. */
static sp__fd_ctx_t *fd_active(int fd, unsigned *flags)
{
    sp__thread_t *t = sp__thread_peek();
    if (!hooks_on(t))
        return NULL;
    /* The watch this fiber last waited on, asked for while the fd's entry
     * is looked up: with many connections both are cold by the time a
     * fiber that has served a message comes back to wait, and the wait
     * needs the entry first, then the watch. */
    const char *w = t->current->last_watch;
    if (w)
        sp__prefetch_lines(w, w + 64);
    sp__fd_ctx_t *c = sp__fd_ctx_flags(fd, flags);
    if (c && atomic_load_explicit(&c->drained, memory_order_relaxed))
        *flags |= SP_FD_DRAINED;
    return c;
}

static unsigned fd_flags(sp__fd_ctx_t *c)
{
    return atomic_load(&c->flags);
}

static int64_t fd_timeout(sp__fd_ctx_t *c, bool reading)
{
    return atomic_load(reading ? &c->rcv_timeout_us : &c->snd_timeout_us);
}

/* A stream read that returned less than asked for emptied the socket's
 * receive queue: the hooks wait before the next read (hooks/io.c). A
 * plain store: the hint is kept apart from the flags for that. */
static void fd_set_drained(sp__fd_ctx_t *c)
{
    atomic_store_explicit(&c->drained, true, memory_order_relaxed);
}

/* sp_run_blocking, with an interrupt's answer as wait_fd's (hook_bridge.h):
 * the hooks must know fn still runs. */
static int run_blocking(void (*fn)(void *), void *arg)
{
    bool abandoned;
    int rc = sp__run_blocking(fn, arg, &abandoned);
    return abandoned ? rc - SP_HOOK_INTERRUPTED : rc;
}

static void fiber_keep(void *p, void (*free_fn)(void *))
{
    sp__fiber_keep(sp__thread()->current, p, free_fn);
}

const sp__hook_bridge_t sp__hook_bridge = {
    .enabled = sp_hook_is_enabled,
    .wait_any = sp__io_hook_wait_any,
    .wait_fd = sp__io_hook_wait,
    .sleep_us = sp_sleep_us,
    .close_fd = sp_io_close_fd,
    .connect_timeout = sp_hook_connect_timeout,
    .fd_ctx = sp__fd_ctx,
    .fd_active = fd_active,
    .fd_ctx_load = sp__fd_ctx_load,
    .fd_flags = fd_flags,
    .fd_timeout = fd_timeout,
    .fd_set_drained = fd_set_drained,
    .fd_adopt = sp__fd_adopt,
    .fd_set_user_nb = sp__fd_set_user_nb,
    .fd_set_timeout = sp__fd_set_timeout,
    .fd_copy = sp__fd_copy,
    .fd_make_nonblocking = sp__fd_make_nonblocking,
    .run_blocking = run_blocking,
    .fiber_keep = fiber_keep,
    .file_offload_all = sp__file_offload_all,
};
