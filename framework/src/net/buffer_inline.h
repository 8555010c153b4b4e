/* Internal: the byte buffer's hot operations, inlined for the framework's
 * own protocol code (the HTTP layer uses them a dozen times per request,
 * and a call each costs more than the work). Same meaning as sp_buf_data,
 * sp_buf_len, sp_buf_reserve, sp_buf_commit, sp_buf_clear, sp_buf_consume
 * and sp_buf_append; the slow paths are those. */
#ifndef SP_BUFFER_INLINE_H
#define SP_BUFFER_INLINE_H

#include <string.h>

#include "spindle/buffer.h"

/* memcpy for the short pieces protocol code copies (a header name or
 * value, a target, a small body): 4 to 16 bytes as two overlapping runs
 * of 4 or 8, whose fixed-size copies compile to plain moves, without a
 * call into the C library; the rest by memcpy. */
static inline void sp__copy(char *dst, const void *src, size_t n)
{
    const char *s = src;
    if (n > 16 || n < 4) {
        if (n)
            memcpy(dst, s, n);
    } else if (n >= 8) {
        char head[8], tail[8];
        memcpy(head, s, 8);
        memcpy(tail, s + n - 8, 8);
        memcpy(dst, head, 8);
        memcpy(dst + n - 8, tail, 8);
    } else {
        char head[4], tail[4];
        memcpy(head, s, 4);
        memcpy(tail, s + n - 4, 4);
        memcpy(dst, head, 4);
        memcpy(dst + n - 4, tail, 4);
    }
}

static inline char *sp__buf_data(const sp_buf_t *b)
{
    return b->data + b->start;
}

static inline size_t sp__buf_len(const sp_buf_t *b)
{
    return b->end - b->start;
}

static inline char *sp__buf_reserve(sp_buf_t *b, size_t n)
{
    return b->data && b->cap - b->end >= n ? b->data + b->end : sp_buf_reserve(b, n);
}

static inline void sp__buf_commit(sp_buf_t *b, size_t n)
{
    b->end += n;
}

static inline void sp__buf_clear(sp_buf_t *b)
{
    b->start = b->end = 0;
}

static inline void sp__buf_consume(sp_buf_t *b, size_t n)
{
    b->start += n < sp__buf_len(b) ? n : sp__buf_len(b);
    if (b->start == b->end)
        b->start = b->end = 0;
}

static inline int sp__buf_append(sp_buf_t *b, const void *p, size_t n)
{
    if (!b->data || b->cap - b->end < n)
        return sp_buf_append(b, p, n);
    sp__copy(b->data + b->end, p, n);
    b->end += n;
    return 0;
}

#endif
