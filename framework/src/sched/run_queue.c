#include "run_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

enum { RQ_MIN_CAP = 64 };

void sp__rq_init(sp__run_queue_t *q)
{
    memset(q, 0, sizeof *q);
}

void sp__rq_fini(sp__run_queue_t *q)
{
    free(q->buf);
    memset(q, 0, sizeof *q);
}

static int grow(sp__run_queue_t *q, size_t need)
{
    size_t cap = q->cap ? q->cap * 2 : RQ_MIN_CAP;
    while (cap < need)
        cap *= 2;
    sp__task_t *buf = sp__malloc(cap * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    for (size_t i = 0; i < q->count; i++)
        buf[i] = q->buf[(q->head + i) & (q->cap - 1)];
    free(q->buf);
    q->buf = buf;
    q->cap = cap;
    q->head = 0;
    return 0;
}

int sp__rq_push(sp__run_queue_t *q, const sp__task_t *t)
{
    if (q->count == q->cap) {
        int rc = grow(q, q->count + 1);
        if (rc < 0)
            return rc;
    }
    q->buf[(q->head + q->count) & (q->cap - 1)] = *t;
    q->count++;
    return 0;
}

int sp__rq_grow(sp__run_queue_t *q, size_t n)
{
    return grow(q, n);
}

bool sp__rq_pop(sp__run_queue_t *q, sp__task_t *out)
{
    if (!q->count)
        return false;
    *out = q->buf[q->head];
    q->head = (q->head + 1) & (q->cap - 1);
    q->count--;
    return true;
}

const sp__task_t *sp__rq_peek(const sp__run_queue_t *q)
{
    return q->count ? &q->buf[q->head] : NULL;
}
