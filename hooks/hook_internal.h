/* Internal to the hook layer: the bridge to the framework and the helpers
 * every hook shares. */
#ifndef SP_HOOK_INTERNAL_H
#define SP_HOOK_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/hook_bridge.h"
#include "real.h"

/* The framework's table, or NULL (preloaded into a program that has not
 * created an IOManager: nothing can park then). */
extern _Atomic(const sp__hook_bridge_t *) sp__hook_table;

static inline const sp__hook_bridge_t *sp__bridge(void)
{
    return atomic_load_explicit(&sp__hook_table, memory_order_acquire);
}

/* The bridge when the calling fiber may park, else NULL. */
const sp__hook_bridge_t *sp__hook_active(void);

/* Set O_NONBLOCK underneath a socket the user believes blocking; false if
 * the kernel refused. */
bool sp__hook_make_nonblocking(sp__fd_ctx_t *c, int fd);

/* When the calling fiber may park and fd is one the hooks manage (a
 * socket created or first used in a fiber, not made non-blocking by the
 * user; an adopted fd): its context, with O_NONBLOCK set in the kernel.
 * Always the bridge in *bp and, if flags is not NULL, the fd's flags as
 * looked up (SP_FD_*; 0 when the fiber may not park). NULL means: call
 * libc as it is (or offload a file's call). */
sp__fd_ctx_t *sp__hook_managed(int fd, const sp__hook_bridge_t **bp, unsigned *flags);

/* sp__hook_managed, inline: the first step of the stream reads and writes
 * (hooks/io.c), which in libspindle have the fd's lookup in their own body
 * (SP_HOOK_DIRECT, hook_bridge.h). `reading`: the call may wait for input
 * next (sp__hook_managed assumes it may). */
static inline sp__fd_ctx_t *sp__hook_lookup(int fd, bool reading, const sp__hook_bridge_t **bp,
                                           unsigned *flags)
{
    const sp__hook_bridge_t *b = sp__bridge();
    unsigned fl = 0;
    sp__fd_ctx_t *c = b ? sp__bridge_fd_active(b, fd, reading, &fl) : NULL;
    *bp = b;
    if (flags)
        *flags = fl; /* also when not managed: a file's calls look at it */
    if (!c || (fl & (SP_FD_MANAGED | SP_FD_USER_NB)) != SP_FD_MANAGED)
        return NULL;
    if (!(fl & SP_FD_SYS_NB) && !sp__hook_make_nonblocking(c, fd))
        return NULL;
    return c;
}

/* Record a new socket fd created in a fiber as non-blocking underneath;
 * user_nb is what the user asked for. */
void sp__hook_adopt(const sp__hook_bridge_t *b, int fd, bool stream, bool user_nb);

/* sp__hook_wait's answer to a wait that did not end ready (rc < 0). */
int sp__hook_wait_failed(const sp__hook_bridge_t *b, int rc);

/* Park until fd is ready for `event` or *deadline_ns passes (the bridge's
 * wait_fd: SP_HOOK_FD_DEADLINE takes the fd's own timeout). 0 = ready
 * (retry the call); otherwise -1 with errno set as the kernel would for a
 * blocking call: EAGAIN on timeout, EBADF when the fd was closed
 * meanwhile, EINTR when the wait was cancelled. Inline: a parked fiber's
 * frames are cold when it resumes, one frame fewer is a cache line fewer
 * to fetch. */
static inline int sp__hook_wait(const sp__hook_bridge_t *b, sp__fd_ctx_t *ctx,
                                int fd, int event, uint64_t *deadline_ns)
{
    int rc = sp__bridge_wait_fd(b, ctx, fd, event, deadline_ns);
    return rc == 0 ? 0 : sp__hook_wait_failed(b, rc);
}

/* glibc's report of a fortify check that failed ("buffer overflow
 * detected"), exported by libc. With -D_FORTIFY_SOURCE its headers route
 * read, recv, recvfrom and poll to __*_chk variants when they know the
 * buffer's size: the hooks define those too, with glibc's check, so such a
 * program cannot slip past them. */
_Noreturn void __chk_fail(void);

/* Deadline for a timeout in microseconds (-1 = none: returns 0). */
uint64_t sp__hook_deadline(int64_t timeout_us);

#endif
