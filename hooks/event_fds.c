/* eventfd, timerfd, signalfd and inotify fds made in a fiber are adopted
 * as sockets are (non-blocking underneath, blocking as the user sees
 * them), so reading one parks the fiber. They are the process's own;
 * pipes are not adopted here (see sp_hook_adopt_fd for why). */
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include "hook_internal.h"

/* fd just made non-blocking underneath; user_nb: the user asked for it. */
static int adopted(const sp__hook_bridge_t *b, int fd, bool user_nb)
{
    if (fd >= 0)
        sp__hook_adopt(b, fd, false, user_nb);
    return fd;
}

int eventfd(unsigned int initval, int flags)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->eventfd(initval, flags);
    return adopted(b, sp__real()->eventfd(initval, flags | EFD_NONBLOCK), flags & EFD_NONBLOCK);
}

int timerfd_create(int clockid, int flags)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->timerfd_create(clockid, flags);
    return adopted(b, sp__real()->timerfd_create(clockid, flags | TFD_NONBLOCK),
                   flags & TFD_NONBLOCK);
}

/* Only a new signalfd (fd -1); for an existing one the call changes its
 * mask and nothing else. */
int signalfd(int fd, const sigset_t *mask, int flags)
{
    const sp__hook_bridge_t *b = fd == -1 ? sp__hook_active() : NULL;
    if (!b)
        return sp__real()->signalfd(fd, mask, flags);
    return adopted(b, sp__real()->signalfd(-1, mask, flags | SFD_NONBLOCK),
                   flags & SFD_NONBLOCK);
}

int inotify_init1(int flags)
{
    const sp__hook_bridge_t *b = sp__hook_active();
    if (!b)
        return sp__real()->inotify_init1(flags);
    return adopted(b, sp__real()->inotify_init1(flags | IN_NONBLOCK), flags & IN_NONBLOCK);
}

int inotify_init(void)
{
    if (!sp__hook_active())
        return sp__real()->inotify_init();
    return inotify_init1(0);
}
