/* What every hook shares: the bridge, the managed-socket check and the
 * park-until-ready step. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <time.h>

#include "base/clock.h"
#include "hook_internal.h"

_Atomic(const sp__hook_bridge_t *) sp__hook_table;

void sp_hook_attach(const sp__hook_bridge_t *b)
{
    atomic_store_explicit(&sp__hook_table, b, memory_order_release);
}

bool sp_hook_attached(void)
{
    return atomic_load(&sp__hook_table) != NULL;
}

const sp__hook_bridge_t *sp__hook_active(void)
{
    const sp__hook_bridge_t *b = sp__bridge();
    return b && b->enabled() ? b : NULL;
}

sp__fd_ctx_t *sp__hook_managed(int fd, const sp__hook_bridge_t **bp, unsigned *flags)
{
    return sp__hook_lookup(fd, true, bp, flags);
}

/* A blocking socket from outside used in a fiber: the user still sees it
 * blocking. */
bool sp__hook_make_nonblocking(sp__fd_ctx_t *c, int fd)
{
    return sp__bridge()->fd_make_nonblocking(c, fd);
}

void sp__hook_adopt(const sp__hook_bridge_t *b, int fd, bool stream, bool user_nb)
{
    b->fd_adopt(fd, (stream ? SP_FD_STREAM : 0) | (user_nb ? SP_FD_USER_NB : 0));
}

uint64_t sp__hook_deadline(int64_t timeout_us)
{
    return timeout_us < 0 ? 0 : sp__now_ns() + (uint64_t)timeout_us * 1000;
}

int sp__hook_wait_failed(const sp__hook_bridge_t *b, int rc)
{
    if (rc <= -SP_HOOK_INTERRUPTED) {
        errno = -rc - SP_HOOK_INTERRUPTED;
        return -1;
    }
    switch (rc) {
    case -ETIMEDOUT:
        errno = EAGAIN;
        return -1;
    case -ECANCELED:
        errno = EINTR;
        return -1;
    case -EEXIST: {
        /* Another fiber already waits on this fd and direction (one waiter
         * per direction): poll again shortly instead. */
        int s = b->sleep_us(1000);
        if (s < 0) {
            errno = -s;
            return -1;
        }
        return 0;
    }
    default:
        errno = -rc;
        return -1;
    }
}
