/* Counting semaphore and wait group: a counter and a FIFO of waiters under
 * one internal lock. The semaphore hands a posted permit straight to the
 * oldest waiter (the count stays 0 while anyone waits), so a fiber arriving
 * later cannot take it first. */
#include "sync_internal.h"

#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <stdlib.h>

#include "spindle/sync.h"

/* ---- semaphore --------------------------------------------------------- */

struct sp_sem {
    sp__spin_t lk;
    unsigned value;
    sp__wq_t q;
};
_Static_assert(offsetof(struct sp_sem, lk) == 0, "sp__sync_new");

sp_sem_t *sp_sem_create(unsigned initial)
{
    if (initial > SP_SEM_MAX) {
        errno = EINVAL;
        return NULL;
    }
    sp_sem_t *s = sp__sync_new(sizeof *s);
    if (s)
        s->value = initial;
    return s;
}

void sp_sem_destroy(sp_sem_t *s)
{
    sp__sync_free(s);
}

int sp_sem_wait(sp_sem_t *s, int64_t timeout_us)
{
    sp__spin_lock(&s->lk);
    if (s->value) {
        s->value--;
        sp__spin_unlock(&s->lk);
        return 0;
    }
    return sp__wait_queued(&s->lk, &s->q, timeout_us, SP__WAIT_SEM);
}

int sp_sem_trywait(sp_sem_t *s)
{
    int rc = sp_sem_wait(s, 0);
    return rc == -ETIMEDOUT ? -EAGAIN : rc;
}

int sp_sem_post(sp_sem_t *s)
{
    int rc = 0;
    sp__spin_lock(&s->lk);
    sp__wnode_t *n = sp__wq_claim_first(&s->q, 0);
    if (!n) {
        if (s->value < SP_SEM_MAX)
            s->value++;
        else
            rc = -EOVERFLOW;
    }
    sp__spin_unlock(&s->lk);
    if (n)
        sp__wait_deliver(n->wait);
    return rc;
}

unsigned sp_sem_value(sp_sem_t *s)
{
    sp__spin_lock(&s->lk);
    unsigned v = s->value;
    sp__spin_unlock(&s->lk);
    return v;
}

/* ---- wait group -------------------------------------------------------- */

struct sp_wg {
    sp__spin_t lk;
    int count;
    sp__wq_t q;
};
_Static_assert(offsetof(struct sp_wg, lk) == 0, "sp__sync_new");

sp_wg_t *sp_wg_create(void)
{
    return sp__sync_new(sizeof(sp_wg_t));
}

void sp_wg_destroy(sp_wg_t *wg)
{
    sp__sync_free(wg);
}

int sp_wg_add(sp_wg_t *wg, int delta)
{
    sp__dlist_t d = {NULL};
    sp__spin_lock(&wg->lk);
    long next = (long)wg->count + delta;
    if (next < 0 || next > INT_MAX) {
        sp__spin_unlock(&wg->lk);
        return -EINVAL;
    }
    wg->count = (int)next;
    sp__wnode_t *n;
    while (!next && (n = sp__wq_claim_first(&wg->q, 0)))
        sp__dlist_add(&d, n->wait);
    /* The last touch of wg: a waiter may free it once delivered. */
    sp__spin_unlock(&wg->lk);
    sp__dlist_deliver(&d);
    return 0;
}

int sp_wg_done(sp_wg_t *wg)
{
    return sp_wg_add(wg, -1);
}

int sp_wg_wait(sp_wg_t *wg, int64_t timeout_us)
{
    sp__spin_lock(&wg->lk);
    if (!wg->count) {
        sp__spin_unlock(&wg->lk);
        return 0;
    }
    return sp__wait_queued(&wg->lk, &wg->q, timeout_us,
                           SP__WAIT_WAITGROUP);
}

int sp_wg_count(sp_wg_t *wg)
{
    sp__spin_lock(&wg->lk);
    int c = wg->count;
    sp__spin_unlock(&wg->lk);
    return c;
}
