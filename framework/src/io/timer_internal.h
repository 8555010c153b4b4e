/* Internal: the per-worker timer heap behind timer.h; it knows the
 * scheduler (timers hold it, callbacks run as its tasks), not the
 * IOManager. Every field of a
 * worker's timers is guarded by that worker's `lock`, so a timer is only
 * ever touched under the lock of the worker that owns it. */
#ifndef SP_TIMER_INTERNAL_H
#define SP_TIMER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "spindle/timer.h"

struct sp_scheduler;

typedef struct sp__timer_slot sp__timer_slot_t;

typedef struct sp__timer_heap {
    pthread_mutex_t lock;
    sp__timer_slot_t *slots; /* grows by realloc, under lock */
    uint32_t nslots, cap;
    uint32_t free_head; /* UINT32_MAX = none */
    uint32_t *heap;     /* slot indices, min-heap by (deadline, seq) */
    uint32_t nheap;
    _Atomic uint32_t armed; /* nheap, readable without the lock */
    uint64_t seq;
    struct sp_scheduler *sched;
    int worker;
} sp__timer_heap_t;

int sp__timer_heap_init(sp__timer_heap_t *h, struct sp_scheduler *s,
                        int worker);
void sp__timer_heap_fini(sp__timer_heap_t *h);
/* The earliest deadline (ns, sp_now_ns clock), or 0 if none. */
uint64_t sp__timer_heap_first(sp__timer_heap_t *h);
/* Run or schedule every due timer. Called by the owning worker only. */
void sp__timer_heap_expire(sp__timer_heap_t *h);

/* Add a timer whose callback runs directly on the owning worker's scheduler
 * context instead of as a task (for framework-internal wake-ups that never
 * block). Owner = the calling worker. */
int sp__timer_add_inline(sp__timer_heap_t *h, uint64_t delay_ns,
                         sp_timer_fn fn, void *arg, sp_timer_id_t *id);

/* The heap's side of timer.h (timer.c picks the heap and wakes its owner).
 * add: a timer on h (holding h's scheduler while armed); *first: it is
 * now the earliest. cancel, retime: 0 or -ENOENT for an id not (or no
 * longer) on h. */
int sp__timer_heap_add(sp__timer_heap_t *h, uint64_t delay_ns, sp_timer_fn fn,
                       void *arg, bool recurring, sp_token_t *alive,
                       sp_timer_id_t *id, bool *first);
int sp__timer_heap_cancel(sp__timer_heap_t *h, sp_timer_id_t id);
int sp__timer_heap_retime(sp__timer_heap_t *h, sp_timer_id_t id, bool set_period,
                          uint64_t period_ns, bool from_now, bool *first);
/* The worker whose heap an id is on. */
int sp__timer_id_worker(sp_timer_id_t id);

#endif
