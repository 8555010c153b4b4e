/* Per-thread fiber state. Kept in its own translation unit so that every
 * access after a context switch is a real call (see fiber_internal.h). */
#include "fiber_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#ifdef SP_TSAN
#include <sanitizer/tsan_interface.h>
#endif

enum { ID_BATCH = 1024 };
/* The alternate signal stack each thread gets, so that overflow.c's
 * SIGSEGV handler can run when a fiber has used up its own stack. */
enum { ALTSTACK_BYTES = 64 * 1024 };

/* Only a pointer is thread-local: it is built with the initial-exec TLS
 * model (one %fs-relative load, no __tls_get_addr call), and 8 bytes fit
 * glibc's static TLS reserve even when the library is dlopen()ed. */
_Thread_local sp__thread_t *sp__thread_self;
static _Atomic uint64_t id_source = 1;
static _Atomic uint32_t token_source;
static pthread_key_t fini_key;
static pthread_once_t fini_once = PTHREAD_ONCE_INIT;

static void altstack_init(sp__thread_t *t)
{
    /* Keep an alternate stack someone else (a sanitizer) already set. */
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE))
        return;
    void *mem = mmap(NULL, ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return; /* overflow then dies without the message, never silently */
    stack_t ss = {.ss_sp = mem, .ss_size = ALTSTACK_BYTES, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(mem, ALTSTACK_BYTES);
        return;
    }
    t->altstack = mem;
}

static void altstack_fini(sp__thread_t *t)
{
    if (!t->altstack)
        return;
    stack_t ss = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    munmap(t->altstack, ALTSTACK_BYTES);
    t->altstack = NULL;
}

static void thread_fini(void *p)
{
    sp__thread_t *t = p;
    sp_fiber_destroy(t->side); /* suspended between calls */
    altstack_fini(p);
    sp__thread_self = NULL;
    free(p);
}

static void make_key(void)
{
    pthread_key_create(&fini_key, thread_fini);
}

static void thread_init(sp__thread_t *t)
{
    memset(&t->root, 0, sizeof t->root);
    strcpy(t->root.name, "root");
    atomic_store(&t->root.state, SP_FIBER_RUNNING);
    t->root.bound = -1;
    t->root.last_worker = -1;
#ifdef SP_TSAN
    t->root.tsan_fiber = __tsan_get_current_fiber();
#endif
    t->current = &t->root;
    t->errno_at = &errno;
    do /* 0 is no thread's; a wrap reuses a number only after 2^32 threads */
        t->token = atomic_fetch_add(&token_source, 1) + 1;
    while (!t->token);
    altstack_init(t);
    pthread_once(&fini_once, make_key);
    pthread_setspecific(fini_key, t);
}

/* Out of line (external, so not inlined as a once-called static would
 * be): sp__thread() itself stays a load, a test and a return, with no
 * registers to save. */
sp__thread_t *sp__thread_first(void)
{
    sp__thread_t *t = calloc(1, sizeof *t);
    if (!t)
        abort(); /* no memory for the thread's first fiber call */
    thread_init(t);
    sp__thread_self = t;
    return t;
}

sp__thread_t *sp__thread(void)
{
    sp__thread_t *t = sp__thread_self;
    return t ? t : sp__thread_first();
}

uint64_t sp__fiber_next_id(sp__thread_t *t)
{
    if (t->next_id == t->id_end) {
        t->next_id = atomic_fetch_add(&id_source, ID_BATCH);
        t->id_end = t->next_id + ID_BATCH;
    }
    return t->next_id++;
}
