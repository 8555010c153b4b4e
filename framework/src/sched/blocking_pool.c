/* Helper threads for calls that block (sp_run_blocking): a FIFO of jobs
 * and up to POOL_MAX threads, started on demand and kept. The waiting fiber
 * parks on a waiter that the helper wakes when the job is done. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "scheduler_internal.h"

enum { POOL_MAX = 8 };

typedef struct job {
    struct job *next;
    void (*fn)(void *);
    void *arg;
    sp__waiter_t *waiter;
} job_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static job_t *head, *tail;
static int threads, idle;

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
        pthread_mutex_unlock(&lock);
        j->fn(j->arg);
        sp__waiter_promise(j->waiter, 0);
        sp__waiter_deliver(j->waiter, true); /* j lives on that fiber's stack */
        pthread_mutex_lock(&lock);
    }
    return NULL;
}

int sp_run_blocking(void (*fn)(void *), void *arg)
{
    if (!sp_scheduler_current() || !sp_fiber_current()) {
        fn(arg);
        return 0;
    }
    sp__waiter_t w;
    sp__waiter_init(&w);
    job_t j = {NULL, fn, arg, &w};
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
            return -rc;
        }
    }
    if (tail)
        tail->next = &j;
    else
        head = &j;
    tail = &j;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
    sp__waiter_wait(&w);
    sp__waiter_settle(&w);
    return 0;
}
