/* Read-write lock: one FIFO queue of readers and writers under `lk`.
 *
 * A newcomer gets the lock at once only when nobody live is queued (so a
 * waiting writer holds back later readers). Releases hand the lock over
 * (grant()): a writer at the head gets it when the lock is free; readers at
 * the head get it, all the consecutive ones together, when no writer holds
 * it. A waiter that times out may have been what held the others back, so
 * leaving the queue runs grant() too. */
#include "sync_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "spindle/sync.h"

enum { READER, WRITER };

struct sp_rwlock {
    sp__spin_t lk;
    unsigned readers;
    void *writer; /* the holder's identity, or NULL */
    sp__wq_t q;
};
_Static_assert(offsetof(struct sp_rwlock, lk) == 0, "sp__sync_new");

sp_rwlock_t *sp_rwlock_create(void)
{
    return sp__sync_new(sizeof(sp_rwlock_t));
}

void sp_rwlock_destroy(sp_rwlock_t *rw)
{
    sp__sync_free(rw);
}

/* lk held: hand the lock to whoever may have it now. */
static void grant(sp_rwlock_t *rw, sp__dlist_t *d)
{
    sp__wnode_t *n;
    while (!rw->writer && (n = sp__wq_live_head(&rw->q))) {
        if (n->kind == WRITER) {
            if (rw->readers)
                return;
            if (sp__wq_claim(&rw->q, n, 0)) {
                rw->writer = n->buf;
                sp__dlist_add(d, n->wait);
                return;
            }
        } else if (sp__wq_claim(&rw->q, n, 0)) {
            rw->readers++;
            sp__dlist_add(d, n->wait);
        }
    }
}

static int lock(sp_rwlock_t *rw, int kind, int64_t timeout_us)
{
    void *me = sp__sync_self();
    sp__spin_lock(&rw->lk);
    if (rw->writer == me) {
        sp__spin_unlock(&rw->lk);
        return -EDEADLK;
    }
    bool free_now = kind == WRITER ? !rw->writer && !rw->readers
                                   : !rw->writer;
    if (free_now && !sp__wq_live_head(&rw->q)) {
        if (kind == WRITER)
            rw->writer = me;
        else
            rw->readers++;
        sp__spin_unlock(&rw->lk);
        return 0;
    }
    if (timeout_us == 0) {
        sp__spin_unlock(&rw->lk);
        return -ETIMEDOUT;
    }
    sp__wait_t w;
    sp__wnode_t n = {.wait = &w, .kind = kind, .buf = me};
    int rc = sp__wait_begin(&w, timeout_us, SP__WAIT_RWLOCK);
    if (rc < 0) {
        sp__spin_unlock(&rw->lk);
        return rc;
    }
    sp__wq_push(&rw->q, &n);
    sp__spin_unlock(&rw->lk);
    rc = sp__wait_block(&w);
    if (sp__wnode_may_be_queued(&w, &n)) { /* timed out */
        sp__dlist_t d = {NULL};
        sp__spin_lock(&rw->lk);
        if (n.queued) {
            sp__wq_remove(&rw->q, &n);
            grant(rw, &d); /* we may have been what held others back */
        }
        sp__spin_unlock(&rw->lk);
        sp__dlist_deliver(&d);
    }
    sp__wait_end(&w);
    return rc;
}

int sp_rwlock_rdlock(sp_rwlock_t *rw, int64_t timeout_us)
{
    return lock(rw, READER, timeout_us);
}

int sp_rwlock_wrlock(sp_rwlock_t *rw, int64_t timeout_us)
{
    return lock(rw, WRITER, timeout_us);
}

int sp_rwlock_tryrdlock(sp_rwlock_t *rw)
{
    int rc = lock(rw, READER, 0);
    return rc == -ETIMEDOUT ? -EBUSY : rc;
}

int sp_rwlock_trywrlock(sp_rwlock_t *rw)
{
    int rc = lock(rw, WRITER, 0);
    return rc == -ETIMEDOUT ? -EBUSY : rc;
}

int sp_rwlock_unlock(sp_rwlock_t *rw)
{
    void *me = sp__sync_self();
    sp__dlist_t d = {NULL};
    int rc = 0;
    sp__spin_lock(&rw->lk);
    if (rw->writer == me)
        rw->writer = NULL;
    else if (!rw->writer && rw->readers)
        rw->readers--;
    else
        rc = -EPERM;
    if (rc == 0)
        grant(rw, &d);
    sp__spin_unlock(&rw->lk);
    sp__dlist_deliver(&d);
    return rc;
}
