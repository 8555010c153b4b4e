/* sp_hook_set_file_offload (hook.h): which file fds' calls the hooks send
 * to the helper pool (hooks/file_offload.c does the sending). */
#include <errno.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "fd_table.h"
#include "spindle/hook.h"

static atomic_bool all_files;

bool sp__file_offload_all(void)
{
    return atomic_load_explicit(&all_files, memory_order_relaxed);
}

int sp_hook_set_file_offload(int fd, bool on)
{
    if (fd == SP_HOOK_ALL_FILES) {
        atomic_store(&all_files, on);
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
        return -EPERM;
    sp__fd_ctx_t *c = sp__fd_ctx(fd);
    if (!c)
        return -EBADF;
    /* An entry left from an fd closed behind the hooks' back is read anew. */
    if (!(sp__fd_ctx_load(c, fd) & SP_FD_FILE))
        sp__fd_refresh(c, fd);
    sp__fd_set_flag(c, SP_FD_OFFLOAD, on);
    return 0;
}
