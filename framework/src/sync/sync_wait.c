/* Wait queues and waits for the sync primitives (see sync_internal.h).
 *
 * A fiber waits with an sp__waiter_t, like an fd wait in io_event.c: its
 * timeout is an inline timer on its own worker, so after the wait a
 * sp_timer_cancel() that fails means the callback has already completed
 * (it runs on this thread), and nothing touches the wait after we return.
 * A plain thread waits on a condvar of its own; the claimer delivers by
 * setting `done` under the condvar's mutex. */
#include "sync_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

void *sp__sync_new(size_t size)
{
    sp__spin_t *lk = calloc(1, size);
    if (!lk) {
        errno = ENOMEM;
        return NULL;
    }
    sp__spin_init(lk);
    return lk;
}

void sp__sync_free(void *obj)
{
    free(obj);
}

/* ---- queues --------------------------------------------------------- */

void sp__wq_push(sp__wq_t *q, sp__wnode_t *n)
{
    sp__list_push_back(&q->list, &n->link);
    n->queued = true;
}

void sp__wq_push_front(sp__wq_t *q, sp__wnode_t *n)
{
    sp__list_push_front(&q->list, &n->link);
    n->queued = true;
}

void sp__wq_remove(sp__wq_t *q, sp__wnode_t *n)
{
    sp__list_remove(&q->list, &n->link);
    n->queued = false;
}

sp__wnode_t *sp__wq_live_head(sp__wq_t *q)
{
    sp__wnode_t *n;
    while ((n = sp__wq_first(q)) && atomic_load(&n->wait->claimed))
        sp__wq_remove(q, n); /* its wait ended elsewhere: stale */
    return n;
}

bool sp__wait_claim(sp__wait_t *w, sp__wnode_t *via, int result)
{
    int open = 0;
    if (!atomic_compare_exchange_strong(&w->claimed, &open, 1))
        return false;
    w->result = result;
    w->winner = via;
    if (w->mode == SP__WAIT_FIBER)
        sp__waiter_promise(&w->w, result);
    return true;
}

bool sp__wq_claim(sp__wq_t *q, sp__wnode_t *n, int result)
{
    sp__wq_remove(q, n);
    return sp__wait_claim(n->wait, n, result);
}

sp__wnode_t *sp__wq_claim_first(sp__wq_t *q, int result)
{
    sp__wnode_t *n;
    while ((n = sp__wq_first(q)))
        if (sp__wq_claim(q, n, result))
            return n;
    return NULL;
}

/* ---- delivery --------------------------------------------------------- */

void sp__wait_deliver(sp__wait_t *w)
{
    if (w->mode == SP__WAIT_FIBER) {
        sp__waiter_deliver(&w->w, true);
        return;
    }
    pthread_mutex_lock(&w->m);
    w->done = true;
    pthread_cond_signal(&w->c);
    /* The waiter may destroy m as soon as it can lock it again: POSIX
     * allows destroying a mutex right after its last unlock. */
    pthread_mutex_unlock(&w->m);
}

void sp__dlist_deliver(sp__dlist_t *d)
{
    sp__wait_t *w = d->head;
    d->head = NULL;
    while (w) {
        sp__wait_t *next = w->dnext; /* w may vanish once delivered */
        sp__wait_deliver(w);
        w = next;
    }
}

/* ---- waiting ---------------------------------------------------------- */

uint64_t sp__deadline(int64_t timeout_us)
{
    if (timeout_us < 0)
        return SP__NO_DEADLINE;
    uint64_t now = sp_now_ns();
    uint64_t d = (uint64_t)timeout_us;
    if (d > (SP__NO_DEADLINE - 1 - now) / 1000)
        return SP__NO_DEADLINE - 1; /* centuries away: bounded all the same */
    return now + d * 1000;
}

void *sp__sync_self(void)
{
    return sp__thread()->current;
}

/* sp_fiber_interrupt's way into a fiber's wait: claim it, as the timeout
 * does. */
static int cancel_wait(sp__waiter_t *waiter, int result)
{
    sp__wait_t *w = (sp__wait_t *)(void *)((char *)waiter - offsetof(sp__wait_t, w));
    return sp__wait_claim(w, NULL, result) ? SP_CANCEL_DECIDED : SP_CANCEL_LATE;
}

int sp__wait_begin(sp__wait_t *w, int64_t timeout_us, sp__wait_kind_t kind)
{
    sp__thread_t *t = sp__thread();
    atomic_init(&w->claimed, 0);
    w->result = 0;
    w->winner = NULL;
    w->dnext = NULL;
    w->deadline_ns = sp__deadline(timeout_us);
    if (t->worker) {
        /* A worker's own context (its loop, a timer callback) must not
         * block: every fiber of the worker would stall with it. */
        if (t->current == &t->root || !t->current->sched)
            return -EPERM;
        w->mode = SP__WAIT_FIBER;
        w->io = NULL;
        if (timeout_us >= 0) {
            w->io = sp_iomanager_current();
            if (!w->io)
                return -ENOTSUP; /* no timers on a plain scheduler */
            w->worker = ((sp__worker_t *)t->worker)->index;
        }
        sp__waiter_init_sole(&w->w); /* only the claimer promises */
        w->w.cancel = cancel_wait;
        w->w.kind = (unsigned char)kind;
        return 0;
    }
    w->mode = SP__WAIT_THREAD;
    w->done = false;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&w->c, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return -rc;
    pthread_mutex_init(&w->m, NULL);
    return 0;
}

void sp__wait_rearm(sp__wait_t *w)
{
    atomic_store(&w->claimed, 0);
    w->result = 0;
    w->winner = NULL;
    if (w->mode == SP__WAIT_FIBER) {
        bool interruptible = w->w.cancel != NULL;
        unsigned char kind = w->w.kind;
        sp__waiter_init_sole(&w->w);
        w->w.cancel = interruptible ? cancel_wait : NULL;
        w->w.kind = kind;
    } else {
        w->done = false;
    }
}

static void on_timeout(void *arg)
{
    sp__wait_t *w = arg;
    if (sp__wait_claim(w, NULL, -ETIMEDOUT))
        sp__waiter_deliver(&w->w, true);
}

static int block_fiber(sp__wait_t *w)
{
    sp_timer_id_t tid = 0;
    if (w->deadline_ns != SP__NO_DEADLINE) {
        uint64_t now = sp_now_ns();
        uint64_t delay = w->deadline_ns > now ? w->deadline_ns - now : 0;
        int rc = sp__timer_add_inline(sp__iom_timer_heap(w->io, w->worker),
                                      delay, on_timeout, w, &tid);
        /* No timer (ENOMEM): end the wait with that error, unless a waker
         * got it first. */
        if (rc < 0 && sp__wait_claim(w, NULL, rc)) {
            sp__waiter_deliver(&w->w, false); /* settle must not wait */
            return rc;
        }
    }
    sp__waiter_wait(&w->w);
    if (tid)
        sp_timer_cancel(w->io, tid); /* fails only once it has run */
    return w->result;
}

static int block_thread(sp__wait_t *w)
{
    struct timespec ts;
    bool timed = w->deadline_ns != SP__NO_DEADLINE;
    if (timed) {
        ts.tv_sec = (time_t)(w->deadline_ns / 1000000000u);
        ts.tv_nsec = (long)(w->deadline_ns % 1000000000u);
    }
    pthread_mutex_lock(&w->m);
    while (!w->done) {
        if (!timed) {
            pthread_cond_wait(&w->c, &w->m);
            continue;
        }
        if (pthread_cond_timedwait(&w->c, &w->m, &ts) != ETIMEDOUT || w->done)
            continue;
        if (sp__wait_claim(w, NULL, -ETIMEDOUT))
            break; /* nobody else will deliver */
        timed = false; /* a waker claimed it: wait for its delivery */
    }
    pthread_mutex_unlock(&w->m);
    return w->result;
}

int sp__wait_block(sp__wait_t *w)
{
    return w->mode == SP__WAIT_FIBER ? block_fiber(w) : block_thread(w);
}

void sp__wait_end(sp__wait_t *w)
{
    if (w->mode == SP__WAIT_FIBER) {
        sp__waiter_settle(&w->w);
    } else {
        pthread_cond_destroy(&w->c);
        pthread_mutex_destroy(&w->m);
    }
}

void sp__wnode_withdraw(sp__spin_t *lk, sp__wq_t *q, const sp__wait_t *w,
                        sp__wnode_t *n)
{
    if (!sp__wnode_may_be_queued(w, n))
        return;
    sp__spin_lock(lk);
    if (n->queued)
        sp__wq_remove(q, n);
    sp__spin_unlock(lk);
}

int sp__wait_queued(sp__spin_t *lk, sp__wq_t *q, int64_t timeout_us,
                    sp__wait_kind_t kind)
{
    if (timeout_us == 0) {
        sp__spin_unlock(lk);
        return -ETIMEDOUT;
    }
    sp__wait_t w;
    sp__wnode_t n = {.wait = &w};
    int rc = sp__wait_begin(&w, timeout_us, kind);
    if (rc < 0) {
        sp__spin_unlock(lk);
        return rc;
    }
    sp__wq_push(q, &n);
    sp__spin_unlock(lk);
    rc = sp__wait_block(&w);
    sp__wnode_withdraw(lk, q, &w, &n);
    sp__wait_end(&w);
    return rc;
}
