/* Helper threads for calls that block (sp_run_blocking): a FIFO of jobs
 * and up to POOL_MAX threads, started on demand and kept. The waiting fiber
 * parks on a waiter that the helper wakes when the job is done. A job is
 * allocated, not on the fiber's stack: an interrupted fiber leaves before
 * its job ends. The fiber and the helper each hold a reference; the last
 * one to let go frees it. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "scheduler_internal.h"

enum { POOL_MAX = 8 };

enum { JOB_PENDING, JOB_DONE, JOB_ABANDONED };

typedef struct job {
    sp__waiter_t waiter; /* first: the waiter's cancel finds the job */
    struct job *next;
    void (*fn)(void *);
    void *arg;
    _Atomic int state;
    _Atomic int refs;
} job_t;

static void job_unref(job_t *j)
{
    if (atomic_fetch_sub(&j->refs, 1) == 1)
        free(j);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static job_t *head, *tail;
static int threads, idle;
static uint64_t queued; /* under the lock */
/* Counted before the fiber is woken, so that it sees its own job. */
static _Atomic uint64_t ran, abandoned;

static void *helper(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!head) {
            idle++;
            pthread_cond_wait(&more, &lock);
            idle--;
        }
        job_t *j = head;
        head = j->next;
        if (!head)
            tail = NULL;
        queued--;
        pthread_mutex_unlock(&lock);
        j->fn(j->arg);
        atomic_fetch_add_explicit(&ran, 1, memory_order_relaxed);
        int pending = JOB_PENDING; /* else its fiber was interrupted */
        if (atomic_compare_exchange_strong(&j->state, &pending, JOB_DONE)) {
            sp__waiter_promise(&j->waiter, 0);
            sp__waiter_deliver(&j->waiter, true);
        } else {
            atomic_fetch_add_explicit(&abandoned, 1, memory_order_relaxed);
        }
        job_unref(j);
        pthread_mutex_lock(&lock);
    }
    return NULL;
}

/* An interrupt: the fiber leaves now, the helper frees the job later. */
static int abandon(sp__waiter_t *w, int result)
{
    job_t *j = (job_t *)(void *)w;
    int pending = JOB_PENDING;
    if (!atomic_compare_exchange_strong(&j->state, &pending, JOB_ABANDONED))
        return SP_CANCEL_LATE;
    sp__waiter_promise(w, result);
    return SP_CANCEL_DECIDED;
}

int sp_blocking_stats(sp_blocking_stats_t *out)
{
    if (!out)
        return -EINVAL;
    pthread_mutex_lock(&lock);
    *out = (sp_blocking_stats_t){.jobs = atomic_load(&ran), .abandoned = atomic_load(&abandoned),
                                 .queued = queued, .threads = (unsigned)threads,
                                 .idle = (unsigned)idle};
    pthread_mutex_unlock(&lock);
    return 0;
}

int sp_run_blocking(void (*fn)(void *), void *arg)
{
    bool abandoned;
    return sp__run_blocking(fn, arg, &abandoned);
}

int sp__run_blocking(void (*fn)(void *), void *arg, bool *abandoned)
{
    *abandoned = false;
    if (!sp_scheduler_current() || !sp_fiber_current()) {
        fn(arg);
        return 0;
    }
    job_t *j = sp__malloc(sizeof *j);
    if (!j)
        return -ENOMEM;
    sp__waiter_init(&j->waiter);
    j->waiter.cancel = abandon;
    j->waiter.kind = SP__WAIT_BLOCKING;
    j->next = NULL;
    j->fn = fn;
    j->arg = arg;
    atomic_init(&j->state, JOB_PENDING);
    atomic_init(&j->refs, 2);
    pthread_mutex_lock(&lock);
    if (!idle && threads < POOL_MAX) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, helper, NULL);
        pthread_attr_destroy(&attr);
        if (rc == 0)
            threads++;
        else if (!threads) {
            pthread_mutex_unlock(&lock);
            free(j);
            return -rc;
        }
    }
    if (tail)
        tail->next = j;
    else
        head = j;
    tail = j;
    queued++;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
    sp__waiter_wait(&j->waiter);
    int rc = sp__waiter_settle(&j->waiter);
    *abandoned = atomic_load(&j->state) == JOB_ABANDONED;
    job_unref(j);
    return rc;
}
