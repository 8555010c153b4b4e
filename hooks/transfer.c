/* Zero-copy transfers with a socket at one end: sendfile, splice and tee.
 * On a socket the user believes blocking they wait for readiness instead
 * of blocking the worker. sendfile goes on until `count` bytes went out,
 * as the write family does (io_write.c); splice and tee return what one
 * call moved, as the kernel does. copy_file_range works on files only, so
 * it stays the kernel's. */
#include <errno.h>
#include <fcntl.h>
#include <sys/sendfile.h>

#include "hook_internal.h"
#include "spindle/iomanager.h"

ssize_t sendfile(int out, int in, off_t *offset, size_t count)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = NULL;
    sp__fd_ctx_t *ctx = sp__hook_managed(out, &b, NULL);
    if (!ctx)
        return r->sendfile(out, in, offset, count);
    uint64_t deadline = SP_HOOK_FD_DEADLINE;
    size_t sent = 0;
    while (sent < count) {
        ssize_t n = r->sendfile(out, in, offset, count - sent);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n == 0) /* the input ended */
            break;
        if (errno != EAGAIN || sp__hook_wait(b, ctx, out, SP_IO_WRITE, &deadline) < 0)
            return sent ? (ssize_t)sent : -1;
    }
    return (ssize_t)sent;
}

/* splice and tee: the managed sockets among the two ends, and the
 * directions a retry waits for. 0 when neither end is one. */
static int managed_ends(int in, int out, const sp__hook_bridge_t **b, sp_io_want_t want[2])
{
    int k = 0;
    if (sp__hook_managed(in, b, NULL))
        want[k++] = (sp_io_want_t){in, SP_IO_READ};
    if (sp__hook_managed(out, b, NULL))
        want[k++] = (sp_io_want_t){out, SP_IO_WRITE};
    return k;
}

/* Park until one end is ready; 0, or -1 with errno set. */
static int wait_ends(const sp__hook_bridge_t *b, const sp_io_want_t *want, int k)
{
    int rc = b->wait_any(want, k, -1);
    if (rc == 0)
        return 0;
    errno = rc <= -SP_HOOK_INTERRUPTED ? -rc - SP_HOOK_INTERRUPTED : -rc;
    return -1;
}

ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
               unsigned flags)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = NULL;
    sp_io_want_t want[2];
    int k = flags & SPLICE_F_NONBLOCK ? 0 : managed_ends(in, out, &b, want);
    for (;;) {
        ssize_t n = r->splice(in, off_in, out, off_out, len, flags);
        if (n >= 0 || errno != EAGAIN || !k)
            return n;
        if (wait_ends(b, want, k) < 0)
            return -1;
    }
}

ssize_t tee(int in, int out, size_t len, unsigned flags)
{
    const sp__real_t *r = sp__real();
    const sp__hook_bridge_t *b = NULL;
    sp_io_want_t want[2];
    int k = flags & SPLICE_F_NONBLOCK ? 0 : managed_ends(in, out, &b, want);
    for (;;) {
        ssize_t n = r->tee(in, out, len, flags);
        if (n >= 0 || errno != EAGAIN || !k)
            return n;
        if (wait_ends(b, want, k) < 0)
            return -1;
    }
}
