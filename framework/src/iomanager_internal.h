/* Internal: IOManager entry points for the hook layer. */
#ifndef SP_IOMANAGER_INTERNAL_H
#define SP_IOMANAGER_INTERNAL_H

#include <stdint.h>

#include "spindle/iomanager.h"

enum { SP_IO_WAIT_MAX = 64 };

typedef struct sp_io_want {
    int fd;
    int events; /* SP_IO_READ | SP_IO_WRITE */
} sp_io_want_t;

/* Wait until any of the wanted events is ready (like sp_io_wait, for up to
 * SP_IO_WAIT_MAX fds). 0 when one is ready; -ETIMEDOUT, -ECANCELED, -EBADF,
 * -EEXIST, -EPERM, -EINVAL as sp_io_wait. */
int sp__io_wait_many(const sp_io_want_t *wants, int n, int64_t timeout_us);

#endif
