/* An fd wait for code that runs in fibers and on plain threads alike (a
 * client library used from either): sp_io_wait's park in an IOManager
 * fiber, poll(2) elsewhere, where sp_io_wait would say -EPERM. */
#include <errno.h>
#include <poll.h>

#include "fd_table.h"
#include "iomanager_internal.h"

int sp__io_wait_or_poll(int fd, int event, int64_t timeout_us)
{
    if (event != SP_IO_READ && event != SP_IO_WRITE)
        return -EINVAL;
    int rc = sp__io_wait_fd(sp__fd_ctx_get(fd), fd, event, timeout_us);
    if (rc != -EPERM)
        return rc;
    struct pollfd p = {fd, (short)(event == SP_IO_READ ? POLLIN : POLLOUT), 0};
    int ms = timeout_us < 0 ? -1 : (int)((timeout_us + 999) / 1000); /* never early */
    do
        rc = poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    return rc > 0 ? 0 : rc == 0 ? -ETIMEDOUT : -errno;
}
