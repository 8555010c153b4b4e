/* Buffers per worker thread, lent to the connection that is reading or
 * answering: input and output, a request's text and header table, a
 * response's header lines and body. With thousands of connections each
 * one's own buffers have left the caches by its next request, and every
 * line the kernel copies a request into, or a response is written into,
 * costs a miss; the lent buffers stay cached because every connection on
 * the thread uses them in turn. A connection that never needs its own
 * allocates none (a burst of new connections touches no new heap pages
 * for them).
 *
 * Lending swaps the buffers: the thread's slot keeps the connection's own
 * (empty) buffer meanwhile, so nothing is allocated or lost. A connection
 * borrows only with an empty buffer and gives back once it is empty again:
 * the input once every request in it was parsed (the parser copies what it
 * keeps), the output once flushed, the request's and the response's once
 * the response is laid out; none is held across the wait for a next
 * request. If a connection parks while holding one (a handler that
 * waits, a full socket, a partial request), the others use their own.
 * Lend and return happen between switches on one thread; a fiber that the
 * monitor moved to another thread keeps what it holds as its own. */
#include <pthread.h>
#include <stdlib.h>

#include "http_internal.h"

typedef struct scratch {
    sp_buf_t buf[SP__WORK_BUFS]; /* the IN and OUT kinds use the first */
    bool lent;
} scratch_t;

typedef struct scratches {
    scratch_t s[SP__SCRATCH_KINDS];
} scratches_t;

static _Thread_local scratches_t *mine;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    scratches_t *all = p;
    for (int i = 0; i < SP__SCRATCH_KINDS; i++)
        for (int j = 0; j < SP__WORK_BUFS; j++)
            sp_buf_free(&all->s[i].buf[j]);
    free(all);
}

static void make_key(void)
{
    pthread_key_create(&key, scratch_free);
}

/* Once per thread: kept out of line, so the lending functions need no
 * stack frame for it. */
static __attribute__((noinline, cold)) scratches_t *make_mine(void)
{
    pthread_once(&key_once, make_key);
    if ((mine = calloc(1, sizeof *mine)))
        pthread_setspecific(key, mine); /* freed at thread exit */
    return mine;
}

static scratch_t *thread_scratch(int kind)
{
    scratches_t *all = mine ? mine : make_mine();
    return all ? &all->s[kind] : NULL;
}

static void swap(sp_buf_t *a, sp_buf_t *b)
{
    sp_buf_t t = *a;
    *a = *b;
    *b = t;
}

static bool all_empty(sp_buf_t *const set[], int n)
{
    for (int i = 0; i < n; i++)
        if (sp__buf_len(set[i]))
            return false;
    return true;
}

/* Inlined into each exported function with its constant n. */
static inline void borrow(sp_buf_t *const set[], int n, bool *borrowed, int kind)
{
    if (*borrowed || !all_empty(set, n))
        return;
    scratch_t *s = thread_scratch(kind);
    if (!s || s->lent)
        return;
    for (int i = 0; i < n; i++)
        swap(set[i], &s->buf[i]);
    s->lent = *borrowed = true;
}

static inline void give_back(sp_buf_t *const set[], int n, bool *borrowed, int kind)
{
    if (!*borrowed || !all_empty(set, n))
        return;
    *borrowed = false;
    scratch_t *s = mine ? &mine->s[kind] : NULL;
    if (s && s->lent) {
        for (int i = 0; i < n; i++)
            swap(set[i], &s->buf[i]);
        s->lent = false;
    } /* else: moved to another thread; keep it as our own */
}

void sp__http_scratch_borrow(sp_buf_t *b, bool *borrowed, int kind)
{
    borrow(&b, 1, borrowed, kind);
}

void sp__http_scratch_return(sp_buf_t *b, bool *borrowed, int kind)
{
    give_back(&b, 1, borrowed, kind);
}

void sp__http_work_borrow(sp_buf_t *const set[SP__WORK_BUFS], bool *borrowed)
{
    borrow(set, SP__WORK_BUFS, borrowed, SP__SCRATCH_WORK);
}

void sp__http_work_return(sp_buf_t *const set[SP__WORK_BUFS], bool *borrowed)
{
    give_back(set, SP__WORK_BUFS, borrowed, SP__SCRATCH_WORK);
}
