/* Internal: a growable FIFO ring of tasks. Not synchronised: the scheduler
 * guards each worker's queues with that worker's lock. */
#ifndef SP_RUN_QUEUE_H
#define SP_RUN_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle/fiber.h"

typedef struct sp__task {
    sp_fiber_t *fiber; /* a fiber to resume, or NULL: run fn(arg) */
    sp_fiber_fn fn;
    void *arg;
    uint64_t seq; /* submission order across a worker's two queues */
    bool bound;   /* runs only on the worker whose queue holds it */
} sp__task_t;

typedef struct sp__run_queue {
    sp__task_t *buf;
    size_t cap; /* power of two, or 0 */
    size_t head;
    size_t count;
} sp__run_queue_t;

void sp__rq_init(sp__run_queue_t *q);
void sp__rq_fini(sp__run_queue_t *q);
/* 0 or -ENOMEM. */
int sp__rq_push(sp__run_queue_t *q, const sp__task_t *t);
/* Room for n tasks in all: 0 or -ENOMEM. */
int sp__rq_grow(sp__run_queue_t *q, size_t n);
static inline int sp__rq_room(sp__run_queue_t *q, size_t n)
{
    return n <= q->cap ? 0 : sp__rq_grow(q, n);
}
bool sp__rq_pop(sp__run_queue_t *q, sp__task_t *out);
/* Oldest task without removing it, or NULL. */
const sp__task_t *sp__rq_peek(const sp__run_queue_t *q);

#endif
