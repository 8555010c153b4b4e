/* The framework's side of the hooks: the per-thread switch, the connect
 * timeout, and the bridge table handed to the hook layer. */
#include <stdatomic.h>

#include "hook_bridge.h"
#include "hook_fast.h"
#include "iomanager_internal.h"
#include "sched/scheduler_internal.h"
#include "spindle/hook.h"
#include "spindle/timer.h"

static _Atomic int64_t connect_timeout_us = 75 * 1000000LL;

void sp_hook_enable(bool on)
{
    sp__thread_t *t = sp__thread();
    t->hooks_off = !on;
    sp__sched_hooks_update(t);
}

bool sp_hook_is_enabled(void)
{
    return sp__hooks_on(sp__thread_peek());
}

void sp_hook_set_connect_timeout(int64_t timeout_us)
{
    atomic_store(&connect_timeout_us, timeout_us < 0 ? -1 : timeout_us);
}

int64_t sp_hook_connect_timeout(void)
{
    return atomic_load(&connect_timeout_us);
}

/* The preloaded hooks' first step (hook_fast.h). */
static sp__fd_ctx_t *fd_active(int fd, bool reading, unsigned *flags)
{
    return sp__hook_fd_active(fd, reading, flags);
}

static unsigned fd_flags(sp__fd_ctx_t *c)
{
    return atomic_load(&c->flags);
}

static int64_t fd_timeout(sp__fd_ctx_t *c, bool reading)
{
    return sp__fd_timeout_us(c, reading);
}

static void fd_set_drained(sp__fd_ctx_t *c)
{
    sp__hook_fd_set_drained(c);
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
