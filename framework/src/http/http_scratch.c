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

_Thread_local sp__scratches_t *sp__http_scratches;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    sp__scratches_t *all = p;
    for (int i = 0; i < SP__SCRATCH_KINDS; i++)
        for (int j = 0; j < SP__WORK_BUFS; j++)
            sp_buf_free(&all->s[i].buf[j]);
    free(all);
}

static void make_key(void)
{
    pthread_key_create(&key, scratch_free);
}

sp__scratches_t *sp__http_scratches_make(void)
{
    pthread_once(&key_once, make_key);
    sp__scratches_t *all = calloc(1, sizeof *all);
    if (all)
        pthread_setspecific(key, all); /* freed at thread exit */
    return sp__http_scratches = all;
}
