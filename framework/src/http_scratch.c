/* An input and an output buffer per worker thread, lent to the connection
 * that is reading or answering. With thousands of connections each one's
 * own buffers have left the caches by its next request, and every line the
 * kernel copies a request into, or a response is written into, costs a
 * miss; the lent buffers stay cached because every connection on the
 * thread uses them in turn.
 *
 * Lending swaps the buffers: the thread's slot keeps the connection's own
 * (empty) buffer meanwhile, so nothing is allocated or lost. A connection
 * borrows only with an empty buffer and gives back once it is empty again:
 * the input once every request in it was parsed (the parser copies what it
 * keeps), the output once flushed; neither is held across the wait for a
 * next request. If a connection parks while holding one (a handler that
 * waits, a full socket, a partial request), the others use their own.
 * Lend and return happen between switches on one thread; a fiber that the
 * monitor moved to another thread keeps what it holds as its own. */
#include <pthread.h>
#include <stdlib.h>

#include "http_internal.h"

typedef struct scratch {
    sp_buf_t buf;
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
        sp_buf_free(&all->s[i].buf);
    free(all);
}

static void make_key(void)
{
    pthread_key_create(&key, scratch_free);
}

static scratch_t *thread_scratch(int kind)
{
    if (!mine) {
        pthread_once(&key_once, make_key);
        if (!(mine = calloc(1, sizeof *mine)))
            return NULL;
        pthread_setspecific(key, mine); /* freed at thread exit */
    }
    return &mine->s[kind];
}

static void swap(sp_buf_t *a, sp_buf_t *b)
{
    sp_buf_t t = *a;
    *a = *b;
    *b = t;
}

void sp__http_scratch_borrow(sp_buf_t *b, bool *borrowed, int kind)
{
    if (*borrowed || sp__buf_len(b))
        return;
    scratch_t *s = thread_scratch(kind);
    if (!s || s->lent)
        return;
    swap(b, &s->buf);
    s->lent = *borrowed = true;
}

void sp__http_scratch_return(sp_buf_t *b, bool *borrowed, int kind)
{
    if (!*borrowed || sp__buf_len(b))
        return;
    *borrowed = false;
    scratch_t *s = mine ? &mine->s[kind] : NULL;
    if (s && s->lent) {
        swap(b, &s->buf);
        s->lent = false;
    } /* else: moved to another thread; keep it as our own */
}
