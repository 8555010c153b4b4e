/* Fiber mutex and condition variable.
 *
 * Mutex state word: LOCKED, and WAITERS while the queue is not empty or a
 * woken waiter has yet to retry. Lock and unlock are one CAS each when
 * WAITERS is clear; otherwise they go through `lk`, the internal lock that
 * guards the queue (held only for a few instructions, never across a wait).
 *
 * Barging with a starvation guard (as Go's sync.Mutex): unlock clears
 * LOCKED and wakes the oldest waiter to retry; anyone may take the mutex
 * meanwhile. Only one waiter is awake at a time (`woken`), so an unlock
 * storm does not wake the whole queue. A woken waiter that loses goes back
 * to the head of the queue keeping its arrival time; once that is older
 * than SP_MUTEX_STARVE_US, unlock hands the mutex over directly (LOCKED
 * stays set, no one can barge). Why not always hand over: then every
 * contended unlock is a wake-up and a switch, and the unlocker, relocking,
 * must park behind the waiter (a convoy). bench/sync_bench.c measures both
 * with one fiber per worker on two workers: hand-over costs microseconds
 * per lock, barging tens of nanoseconds, close to a pthread mutex. */
#include "sync_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "spindle/sync.h"

enum { LOCKED = 1u, WAITERS = 2u };
enum { GRANTED = 0, RETRY = 1 }; /* a waiter's result besides -ETIMEDOUT */

struct sp_mutex {
    sp__spin_t lk;
    _Atomic unsigned state;
    _Atomic(void *) owner; /* for -EPERM / -EDEADLK checks only */
    sp__wq_t q; /* under lk */
    bool woken; /* under lk: a waiter was woken to retry */
    /* Benchmarks only: always hand over (see sp__mutex_set_fair). */
    bool fair;
};
_Static_assert(offsetof(struct sp_mutex, lk) == 0, "sp__sync_new");

sp_mutex_t *sp_mutex_create(void)
{
    return sp__sync_new(sizeof(sp_mutex_t));
}

void sp_mutex_destroy(sp_mutex_t *m)
{
    sp__sync_free(m);
}

void sp__mutex_set_fair(sp_mutex_t *m, bool fair)
{
    m->fair = fair;
}

/* lk held: WAITERS says whether unlock has anyone to think about. */
static void fix_waiters(sp_mutex_t *m)
{
    if (!sp__list_empty(&m->q.list) || m->woken)
        atomic_fetch_or(&m->state, WAITERS);
    else
        atomic_fetch_and(&m->state, ~WAITERS);
}

static bool try_acquire(sp_mutex_t *m)
{
    unsigned s = atomic_load_explicit(&m->state, memory_order_relaxed);
    while (!(s & LOCKED))
        if (atomic_compare_exchange_weak_explicit(&m->state, &s, s | LOCKED,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    return false;
}

static int lock_slow(sp_mutex_t *m, void *me, int64_t timeout_us, bool interruptible)
{
    if (atomic_load_explicit(&m->owner, memory_order_relaxed) == me)
        return -EDEADLK;
    sp__wait_t w;
    sp__wnode_t n = {.wait = &w, .buf = me};
    bool begun = false, woken = false;
    int rc;
    sp__spin_lock(&m->lk);
    for (;;) {
        if (woken) { /* our retry: another may be woken from now on */
            m->woken = false;
            woken = false;
        }
        /* Announce ourselves before the last look, so an unlock that
         * follows it takes the slow path and finds us. */
        atomic_fetch_or(&m->state, WAITERS);
        if (try_acquire(m)) {
            rc = 0;
            break;
        }
        if (timeout_us == 0 || (begun && sp_now_ns() >= w.deadline_ns)) {
            rc = -ETIMEDOUT;
            break;
        }
        if (!begun) {
            rc = sp__wait_begin(&w, timeout_us, SP__WAIT_MUTEX);
            if (rc < 0)
                break;
            if (!interruptible)
                sp__wait_uninterruptible(&w);
            begun = true;
            n.since_ns = sp_now_ns();
            sp__wq_push(&m->q, &n);
        } else {
            sp__wait_rearm(&w);
            sp__wq_push_front(&m->q, &n); /* lost a race: keep our turn */
        }
        sp__spin_unlock(&m->lk);
        rc = sp__wait_block(&w);
        sp__spin_lock(&m->lk);
        if (n.queued) /* timed out: still in the queue */
            sp__wq_remove(&m->q, &n);
        if (rc != RETRY)
            break; /* GRANTED: LOCKED was kept set for us; or timed out */
        woken = true;
    }
    fix_waiters(m);
    sp__spin_unlock(&m->lk);
    if (begun)
        sp__wait_end(&w);
    if (rc == 0)
        atomic_store_explicit(&m->owner, me, memory_order_relaxed);
    return rc;
}

static int lock(sp_mutex_t *m, int64_t timeout_us, bool interruptible)
{
    void *me = sp__sync_self();
    unsigned s = 0;
    if (atomic_compare_exchange_strong_explicit(&m->state, &s, LOCKED,
                                                memory_order_acquire,
                                                memory_order_relaxed)) {
        atomic_store_explicit(&m->owner, me, memory_order_relaxed);
        return 0;
    }
    return lock_slow(m, me, timeout_us, interruptible);
}

int sp_mutex_timedlock(sp_mutex_t *m, int64_t timeout_us)
{
    return lock(m, timeout_us, true);
}

int sp_mutex_lock(sp_mutex_t *m)
{
    return sp_mutex_timedlock(m, SP_FOREVER);
}

int sp_mutex_trylock(sp_mutex_t *m)
{
    if (!try_acquire(m))
        return -EBUSY;
    atomic_store_explicit(&m->owner, sp__sync_self(), memory_order_relaxed);
    return 0;
}

static void unlock_slow(sp_mutex_t *m)
{
    sp__wait_t *wake = NULL;
    bool handed = false;
    uint64_t now = 0;
    sp__wnode_t *n;
    sp__spin_lock(&m->lk);
    while ((n = sp__wq_live_head(&m->q))) {
        if (!now && !m->fair)
            now = sp_now_ns();
        if (m->fair || now - n->since_ns >= SP_MUTEX_STARVE_US * 1000ull) {
            /* Hand over: LOCKED stays set, so nobody barges in between. */
            if (sp__wq_claim(&m->q, n, GRANTED)) {
                wake = n->wait;
                handed = true;
                break;
            }
            continue; /* its timeout won the claim just now */
        }
        if (m->woken)
            break; /* a waiter is already on its way to retry */
        if (sp__wq_claim(&m->q, n, RETRY)) {
            m->woken = true;
            wake = n->wait;
            break;
        }
    }
    if (!handed)
        atomic_fetch_and_explicit(&m->state, ~LOCKED, memory_order_release);
    fix_waiters(m);
    sp__spin_unlock(&m->lk);
    if (wake)
        sp__wait_deliver(wake);
}

int sp_mutex_unlock(sp_mutex_t *m)
{
    void *me = sp__sync_self();
    if (atomic_load_explicit(&m->owner, memory_order_relaxed) != me)
        return -EPERM;
    atomic_store_explicit(&m->owner, NULL, memory_order_relaxed);
    unsigned s = LOCKED;
    if (!atomic_compare_exchange_strong_explicit(&m->state, &s, 0,
                                                 memory_order_release,
                                                 memory_order_relaxed))
        unlock_slow(m);
    return 0;
}

/* ---- condition variable ------------------------------------------------ */

struct sp_cond {
    sp__spin_t lk;
    sp__wq_t q;
};
_Static_assert(offsetof(struct sp_cond, lk) == 0, "sp__sync_new");

sp_cond_t *sp_cond_create(void)
{
    return sp__sync_new(sizeof(sp_cond_t));
}

void sp_cond_destroy(sp_cond_t *c)
{
    sp__sync_free(c);
}

int sp_cond_wait(sp_cond_t *c, sp_mutex_t *m, int64_t timeout_us)
{
    if (atomic_load_explicit(&m->owner, memory_order_relaxed) !=
        sp__sync_self())
        return -EPERM;
    if (timeout_us == 0)
        return -ETIMEDOUT;
    sp__wait_t w;
    sp__wnode_t n = {.wait = &w};
    int rc = sp__wait_begin(&w, timeout_us, SP__WAIT_COND);
    if (rc < 0)
        return rc;
    /* Queued before m is released: a signal sent after the release finds
     * us, so none is lost. */
    sp__spin_lock(&c->lk);
    sp__wq_push(&c->q, &n);
    sp__spin_unlock(&c->lk);
    sp_mutex_unlock(m);
    rc = sp__wait_block(&w);
    sp__wnode_withdraw(&c->lk, &c->q, &w, &n);
    sp__wait_end(&w);
    lock(m, SP_FOREVER, false);
    return rc;
}

static int wake(sp_cond_t *c, bool all)
{
    sp__dlist_t d = {NULL};
    sp__spin_lock(&c->lk);
    sp__wnode_t *n;
    while ((n = sp__wq_claim_first(&c->q, 0))) {
        sp__dlist_add(&d, n->wait);
        if (!all)
            break;
    }
    sp__spin_unlock(&c->lk);
    sp__dlist_deliver(&d);
    return 0;
}

int sp_cond_signal(sp_cond_t *c)
{
    return wake(c, false);
}

int sp_cond_broadcast(sp_cond_t *c)
{
    return wake(c, true);
}
