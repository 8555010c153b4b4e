/* Internal: the wait queues behind sync.h and group.h.
 *
 * A blocked caller owns one sp__wait_t and one sp__wnode_t per queue it
 * waits in (several for sp_chan_select), all on its stack. A wait ends
 * exactly once, by whoever *claims* it first (a CAS on `claimed`):
 *   - a waker, under the lock of the queue it found the node in: it takes
 *     the node off (sp__wq_claim*), fills in the result (and any item),
 *     and after unlocking delivers (sp__wait_deliver / sp__dlist_deliver);
 *   - the timeout: a fiber's inline timer on its own worker, or a plain
 *     thread's timed condvar wait.
 * This is io_event.c's take/deliver split, with the claim added because a
 * node can sit in several queues (select) and a waker must not hand over a
 * lock or an item to a wait that already ended: a waker that loses the
 * claim unlinks the stale node and moves on to the next one. The claimer
 * is the only one to sp__waiter_promise(), so the waiter's result never
 * races. A claimed node still queued is stale; its owner unlinks it when
 * it withdraws (under the queue's lock), or a waker drops it first.
 *
 * Caller protocol:
 *   lock; fast path or sp__wait_begin() (context checks) and enqueue
 *   nodes; unlock; rc = sp__wait_block(); for each queue: lock, unlink
 *   the node if still queued, unlock; sp__wait_end().
 */
#ifndef SP_SYNC_INTERNAL_H
#define SP_SYNC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/iomanager_internal.h"
#include "base/list.h"
#include "base/spin.h"

typedef struct sp__wait sp__wait_t;

typedef struct sp__wnode {
    sp__link_t link;
    sp__wait_t *wait;
    bool queued;
    int kind;     /* the primitive's: reader/writer, send/recv */
    int index;    /* select: which case */
    void *buf;    /* the primitive's: item to send / place to receive */
    uint64_t since_ns; /* mutex: when it first queued (starvation guard) */
} sp__wnode_t;

typedef struct sp__wq {
    sp__list_t list; /* of sp__wnode_t */
} sp__wq_t;

/* The first node of q, or NULL. */
static inline sp__wnode_t *sp__wq_first(const sp__wq_t *q)
{
    return q->list.head ? sp__list_entry(q->list.head, sp__wnode_t, link) : NULL;
}

enum { SP__WAIT_FIBER = 1, SP__WAIT_THREAD = 2 };
#define SP__NO_DEADLINE UINT64_MAX

struct sp__wait {
    _Atomic int claimed;
    int mode;
    int result;           /* set by the claimer before delivering */
    sp__wnode_t *winner;  /* the node it was claimed through; NULL: timeout */
    sp__wait_t *dnext;    /* deliver-list link, owned by the claimer */
    uint64_t deadline_ns; /* monotonic, or SP__NO_DEADLINE */
    /* Fiber mode. */
    sp__waiter_t w;
    sp_iomanager_t *io; /* for the timeout timer */
    int worker;
    /* Thread mode. */
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
};

/* Waits claimed under a lock, delivered after it is released. */
typedef struct sp__dlist {
    sp__wait_t *head;
} sp__dlist_t;

/* Can the caller wait? Sets up w for the calling context and timeout
 * (timeout_us != 0; callers handle 0 themselves). -EPERM on a worker
 * outside a task fiber, -ENOTSUP for a bounded wait in a fiber without an
 * IOManager. Nothing to undo on failure. `kind` is what dumps show. */
int sp__wait_begin(sp__wait_t *w, int64_t timeout_us, sp__wait_kind_t kind);
/* After sp__wait_begin: sp_fiber_interrupt cannot end this wait (a
 * condition's relock: pthread_cond_wait returns with the mutex held). */
static inline void sp__wait_uninterruptible(sp__wait_t *w)
{
    w->w.cancel = NULL;
}
/* Reuse a wait that was delivered (a mutex waiter woken to retry). */
void sp__wait_rearm(sp__wait_t *w);
/* Block until claimed; returns the result. */
int sp__wait_block(sp__wait_t *w);
/* After withdrawing every node. */
void sp__wait_end(sp__wait_t *w);
/* Deliver a claimed wait: wake its fiber or thread. Last touch of w. */
void sp__wait_deliver(sp__wait_t *w);

/* The whole slow path of a plain wait: with lk held (the caller's fast
 * path failed), queue one node on q, wait, withdraw. Releases lk. Returns
 * the claimer's result, -ETIMEDOUT (also at once for timeout_us 0), or
 * sp__wait_begin's error. */
int sp__wait_queued(sp__spin_t *lk, sp__wq_t *q, int64_t timeout_us,
                    sp__wait_kind_t kind);

/* After sp__wait_block: may n still be in its queue? Not if the wait was
 * claimed through n (the claimer took n off under the queue's lock before
 * it delivered); then withdrawing n needs no lock. */
static inline bool sp__wnode_may_be_queued(const sp__wait_t *w,
                                           const sp__wnode_t *n)
{
    return w->winner != n;
}
/* After sp__wait_block: take n, w's node, off q (guarded by lk) if it is
 * still there. */
void sp__wnode_withdraw(sp__spin_t *lk, sp__wq_t *q, const sp__wait_t *w,
                        sp__wnode_t *n);

/* Claim w directly (the waiter itself, or code that found it in a queue
 * and removed the node on its own). false if already claimed. */
bool sp__wait_claim(sp__wait_t *w, sp__wnode_t *via, int result);

void sp__wq_push(sp__wq_t *q, sp__wnode_t *n);
void sp__wq_push_front(sp__wq_t *q, sp__wnode_t *n);
void sp__wq_remove(sp__wq_t *q, sp__wnode_t *n);
/* Drop stale nodes at the head; the first live node or NULL. */
sp__wnode_t *sp__wq_live_head(sp__wq_t *q);
/* Take n off q and claim its wait with result; false (n dropped) if the
 * wait was already claimed. */
bool sp__wq_claim(sp__wq_t *q, sp__wnode_t *n, int result);
/* The first node whose wait could be claimed, taken off and claimed; stale
 * nodes before it are dropped. NULL if none. */
sp__wnode_t *sp__wq_claim_first(sp__wq_t *q, int result);

static inline void sp__dlist_add(sp__dlist_t *d, sp__wait_t *w)
{
    w->dnext = d->head;
    d->head = w;
}
void sp__dlist_deliver(sp__dlist_t *d);

/* Every sync object starts with its internal lock, a spin lock: it guards
 * a few queue operations, never a wait (a waiting fiber parks, a waiting
 * thread sleeps on its own condvar, both after unlocking). Allocate one
 * zeroed, lock initialised (NULL + errno ENOMEM), and free one. */
void *sp__sync_new(size_t size);
void sp__sync_free(void *obj);

/* Nanoseconds to wait from timeout_us, saturating. */
uint64_t sp__deadline(int64_t timeout_us);

/* Benchmarks only: make m always hand over on unlock (no barging), to
 * compare the two (bench/sync_bench.c). */
struct sp_mutex;
void sp__mutex_set_fair(struct sp_mutex *m, bool fair);

/* The identity of the calling context (its fiber, or the thread's root
 * pseudo-fiber): lock owners. */
void *sp__sync_self(void);

#endif
