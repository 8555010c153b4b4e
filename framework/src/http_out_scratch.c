/* One output buffer per worker thread, lent to the connection that is
 * producing responses. With thousands of connections each one's own buffer
 * has left the caches by its next request, and writing a response into it
 * costs a miss per line; the lent buffer stays cached because every
 * connection on the thread writes into it in turn.
 *
 * Lending swaps the buffers: the thread's slot keeps the connection's own
 * (empty) buffer meanwhile, so nothing is allocated or lost. A connection
 * borrows only with an empty buffer and gives back once a flush emptied it
 * again, always before it waits for input; if it parks in between (a
 * handler that waits, a full socket), the others use their own buffers.
 * Lend and return happen between switches on one thread; a fiber that the
 * monitor moved to another thread keeps what it holds as its own. */
#include <pthread.h>
#include <stdlib.h>

#include "http_internal.h"

typedef struct scratch {
    sp_buf_t buf;
    bool lent;
} scratch_t;

static _Thread_local scratch_t *mine;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    scratch_t *s = p;
    sp_buf_free(&s->buf);
    free(s);
}

static void make_key(void)
{
    pthread_key_create(&key, scratch_free);
}

static scratch_t *thread_scratch(void)
{
    if (!mine) {
        pthread_once(&key_once, make_key);
        if (!(mine = calloc(1, sizeof *mine)))
            return NULL;
        pthread_setspecific(key, mine); /* freed at thread exit */
    }
    return mine;
}

static void swap(sp_buf_t *a, sp_buf_t *b)
{
    sp_buf_t t = *a;
    *a = *b;
    *b = t;
}

void sp__http_out_borrow(sp__http_out_t *o)
{
    if (o->borrowed || sp__buf_len(&o->buf))
        return;
    scratch_t *s = thread_scratch();
    if (!s || s->lent)
        return;
    swap(&o->buf, &s->buf);
    s->lent = o->borrowed = true;
}

void sp__http_out_return(sp__http_out_t *o)
{
    if (!o->borrowed || sp__buf_len(&o->buf))
        return;
    o->borrowed = false;
    scratch_t *s = mine;
    if (s && s->lent) {
        swap(&o->buf, &s->buf);
        s->lent = false;
    } /* else: moved to another thread; keep it as our own */
}
