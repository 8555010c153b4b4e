/* The thread's side stack (sp__side_call): a fiber per thread, made on
 * first use and kept until the thread ends, that runs one call at a time
 * for whatever runs on the thread. For deep calls that never switch, such
 * as OpenSSL's record and handshake work over a socket that never blocks:
 * their frames then touch one stack per thread, warm in the cache, rather
 * than every fiber's, and a fiber's stack stays as deep as its own code
 * (an idle TLS connection's fiber keeps one page, not two). */
#include "fiber_internal.h"

/* OpenSSL's handshake goes about 40 KiB deep; committed as touched. */
#define SIDE_STACK (256u * 1024u)

static void side_main(void *arg)
{
    sp__thread_t *t = arg; /* the side fiber never leaves its thread */
    for (;;) {
        t->side_fn(t->side_arg);
        sp_fiber_yield();
    }
}

void sp__side_call(void (*fn)(void *), void *arg)
{
    sp__thread_t *t = sp__thread();
    if (!t->side)
        t->side = sp_fiber_create(side_main, t, SIDE_STACK, "side stack");
    if (!t->side || t->current == t->side) { /* no memory, or nested */
        fn(arg);
        return;
    }
    t->side_fn = fn;
    t->side_arg = arg;
    sp_fiber_resume(t->side);
}
