/* Internal: the first step of every hooked call, inline. Whether the
 * calling fiber may park, and its fd's entry with the entry's flags: the
 * bridge's fd_active (hook_switch.c) is this as a function, for the
 * preloaded hooks; the hooks linked into libspindle (SP_HOOK_DIRECT,
 * hook_bridge.h) have it inline in the hooked call. */
#ifndef SP_HOOK_FAST_H
#define SP_HOOK_FAST_H

#include "fd_table.h"
#include "sched/scheduler_internal.h"

/* Whether a hooked call on thread t may park. */
static inline bool sp__hooks_on(const sp__thread_t *t)
{
    return t && t->hooks_park && t->current->sched; /* the root fiber has none */
}

/* `reading`: the call may wait for input next. */
static inline sp__fd_ctx_t *sp__hook_fd_active(int fd, bool reading, unsigned *flags)
{
    sp__thread_t *t = sp__thread_peek();
    if (!sp__hooks_on(t))
        return NULL;
    /* The watch this fiber last waited on, asked for while the fd's entry
     * is looked up: with many connections both are cold by the time a
     * fiber that has served a message comes back to wait, and the wait
     * needs the entry first, then the watch. A write seldom waits. */
    const char *w = t->current->last_watch;
    if (w && reading)
        sp__prefetch_lines(w, w + 64);
    sp__fd_ctx_t *c = sp__fd_ctx_flags(fd, flags);
    if (c && atomic_load_explicit(&c->drained, memory_order_relaxed))
        *flags |= SP_FD_DRAINED;
    return c;
}

/* A stream read that returned less than asked for emptied the socket's
 * receive queue: the hooks wait before the next read (hooks/io.c). A
 * plain store: the hint is kept apart from the flags for that. */
static inline void sp__hook_fd_set_drained(sp__fd_ctx_t *c)
{
    atomic_store_explicit(&c->drained, true, memory_order_relaxed);
}

/* sp__io_wait_fd with the hooks' deadline rules: the bridge's wait_fd
 * (io_event.c). */
int sp__io_hook_wait(sp__fd_ctx_t *ctx, int fd, int event, uint64_t *deadline_ns);

#endif
