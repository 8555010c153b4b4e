/* The one iovec-advance step: after a write took `done` bytes of
 * iov[0, n), drop what went out. Returns the index of the first iovec with
 * bytes left (n if none), whose base and length now cover only the rest. */
#ifndef SP_BASE_IOV_H
#define SP_BASE_IOV_H

#include <stddef.h>
#include <sys/uio.h>

static inline int sp__iov_advance(struct iovec *iov, int n, size_t done)
{
    int i = 0;
    while (i < n && done >= iov[i].iov_len)
        done -= iov[i++].iov_len;
    if (i < n) {
        iov[i].iov_base = (char *)iov[i].iov_base + done;
        iov[i].iov_len -= done;
    }
    return i;
}

#endif
