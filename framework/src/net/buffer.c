/* Growable byte FIFO. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffer_inline.h"
#include "spindle/buffer.h"
#include "spindle/net.h"

void sp_buf_init(sp_buf_t *b)
{
    memset(b, 0, sizeof *b);
}

void sp_buf_free(sp_buf_t *b)
{
    free(b->data);
    sp_buf_init(b);
}

char *sp_buf_data(const sp_buf_t *b)
{
    return b->data + b->start;
}

size_t sp_buf_len(const sp_buf_t *b)
{
    return b->end - b->start;
}

char *sp_buf_reserve(sp_buf_t *b, size_t n)
{
    if (b->cap - b->end >= n)
        return b->data + b->end;
    size_t len = sp_buf_len(b);
    if (b->cap - len >= n && b->start) { /* reclaim consumed bytes */
        memmove(b->data, b->data + b->start, len);
    } else {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - len < n) {
            if (cap > SIZE_MAX / 2) {
                errno = ENOMEM;
                return NULL;
            }
            cap *= 2;
        }
        char *d = malloc(cap);
        if (!d) {
            errno = ENOMEM;
            return NULL;
        }
        if (len)
            memcpy(d, b->data + b->start, len);
        free(b->data);
        b->data = d;
        b->cap = cap;
    }
    b->start = 0;
    b->end = len;
    return b->data + b->end;
}

void sp_buf_commit(sp_buf_t *b, size_t n)
{
    sp__buf_commit(b, n);
}

int sp_buf_append(sp_buf_t *b, const void *p, size_t n)
{
    char *dst = sp_buf_reserve(b, n);
    if (!dst)
        return -ENOMEM;
    memcpy(dst, p, n);
    b->end += n;
    return 0;
}

void sp_buf_consume(sp_buf_t *b, size_t n)
{
    sp__buf_consume(b, n);
}

void sp_buf_clear(sp_buf_t *b)
{
    sp__buf_clear(b);
}

ssize_t sp_buf_read_fd(sp_buf_t *b, int fd, size_t max)
{
    char *dst = sp_buf_reserve(b, max);
    if (!dst)
        return -ENOMEM;
    ssize_t n;
    do
        n = read(fd, dst, max);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    b->end += (size_t)n;
    return n;
}

ssize_t sp_buf_write_fd(sp_buf_t *b, int fd)
{
    ssize_t n = sp_write_full(fd, sp_buf_data(b), sp_buf_len(b));
    if (n >= 0)
        sp_buf_clear(b);
    return n;
}
