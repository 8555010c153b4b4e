/* sp_hook_adopt_fd and sp_hook_release_fd (hook.h): an fd from elsewhere
 * made cooperative, and given back.
 *
 * Pipes, FIFOs and terminals are not adopted on their own: O_NONBLOCK is
 * a flag of the open file, which a pipe to a child process or a terminal
 * shares with other processes, and setting it underneath would make their
 * blocking reads fail with EAGAIN. The program knows when an fd is its
 * alone; it adopts it then, and releases it before sharing it. */
#include <errno.h>
#include <sys/stat.h>

#include "fd_table.h"
#include "spindle/hook.h"

int sp_hook_adopt_fd(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    /* Always "ready" to poll: as epoll_ctl, refuse them. */
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode))
        return -EPERM;
    sp__fd_ctx_t *c = sp__fd_ctx(fd);
    if (!c)
        return -EBADF;
    /* Not managed yet: what the entry says may be left from an fd closed
     * behind the hooks' back, and reading it anew loses nothing. */
    if (!(sp__fd_ctx_load(c, fd) & SP_FD_MANAGED) &&
        !(sp__fd_refresh(c, fd) & SP_FD_MANAGED))
        sp__fd_set_flag(c, SP_FD_MANAGED, true);
    return sp__fd_make_nonblocking(c, fd) ? 0 : -errno;
}

int sp_hook_release_fd(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    sp__fd_ctx_t *c = sp__fd_ctx(fd);
    return c ? sp__fd_release(c, fd) : -EBADF;
}
