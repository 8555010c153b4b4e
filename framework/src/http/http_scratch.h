/* Internal: buffers per worker thread lent to the connection that is
 * reading or answering (why and when: http_scratch.c). Inline, and the
 * loops over a set unrolled: every request borrows and gives back three
 * kinds, the work set's four buffers among them, and a call or a loop's
 * bookkeeping would cost more than the swaps. */
#ifndef SP_HTTP_SCRATCH_H
#define SP_HTTP_SCRATCH_H

#include <stdbool.h>

#include "net/buffer_inline.h"

/* Use the calling thread's cached scratch buffer of this kind in place of
 * b while b is empty (a no-op if another connection has it), and give it
 * back once b is empty again; *borrowed tracks it. The working set of one
 * request is lent as one: its text, its header table, the response's
 * header lines and body (all empty to borrow, all empty to give back). */
enum { SP__SCRATCH_IN, SP__SCRATCH_OUT, SP__SCRATCH_WORK, SP__SCRATCH_KINDS };
enum { SP__WORK_BUFS = 4 };

typedef struct sp__scratch {
    sp_buf_t buf[SP__WORK_BUFS]; /* the IN and OUT kinds use the first */
    bool lent;
} sp__scratch_t;

typedef struct sp__scratches {
    sp__scratch_t s[SP__SCRATCH_KINDS];
} sp__scratches_t;

/* The thread's buffers; NULL until its first borrow. */
extern _Thread_local sp__scratches_t *sp__http_scratches;
/* Make them (NULL: out of memory). */
sp__scratches_t *sp__http_scratches_make(void);

static inline void sp__http_buf_swap(sp_buf_t *a, sp_buf_t *b)
{
    sp_buf_t t = *a;
    *a = *b;
    *b = t;
}

/* The loops over set[0..n) written out (n, at most four, is a constant at
 * every call, so the tests of n fold away). */
_Static_assert(SP__WORK_BUFS == 4, "the set's helpers below name four buffers");

static inline void sp__http_swap_set(sp_buf_t *const set[], sp__scratch_t *s, int n)
{
    sp__http_buf_swap(set[0], &s->buf[0]);
    if (n > 1)
        sp__http_buf_swap(set[1], &s->buf[1]);
    if (n > 2)
        sp__http_buf_swap(set[2], &s->buf[2]);
    if (n > 3)
        sp__http_buf_swap(set[3], &s->buf[3]);
}

/* Lend to a set the caller knows is empty. */
static inline void sp__http_lend(sp_buf_t *const set[], int n, bool *borrowed, int kind)
{
    if (*borrowed)
        return;
    sp__scratches_t *all = sp__http_scratches ? sp__http_scratches : sp__http_scratches_make();
    sp__scratch_t *s = all ? &all->s[kind] : NULL;
    if (!s || s->lent)
        return;
    sp__http_swap_set(set, s, n);
    s->lent = *borrowed = true;
}

/* Give back a set the caller knows is empty. */
static inline void sp__http_give_back(sp_buf_t *const set[], int n, bool *borrowed, int kind)
{
    if (!*borrowed)
        return;
    *borrowed = false;
    sp__scratch_t *s = sp__http_scratches ? &sp__http_scratches->s[kind] : NULL;
    if (s && s->lent) {
        sp__http_swap_set(set, s, n);
        s->lent = false;
    } /* else: moved to another thread; keep it as our own */
}

static inline void sp__http_scratch_borrow(sp_buf_t *b, bool *borrowed, int kind)
{
    if (!sp__buf_len(b))
        sp__http_lend(&b, 1, borrowed, kind);
}

static inline void sp__http_scratch_return(sp_buf_t *b, bool *borrowed, int kind)
{
    if (!sp__buf_len(b))
        sp__http_give_back(&b, 1, borrowed, kind);
}

/* The work set, which the caller knows is empty (checking four buffers
 * would cost more than the swaps' bookkeeping). */
static inline void sp__http_work_borrow(sp_buf_t *const set[SP__WORK_BUFS], bool *borrowed)
{
    sp__http_lend(set, SP__WORK_BUFS, borrowed, SP__SCRATCH_WORK);
}

static inline void sp__http_work_return(sp_buf_t *const set[SP__WORK_BUFS], bool *borrowed)
{
    sp__http_give_back(set, SP__WORK_BUFS, borrowed, SP__SCRATCH_WORK);
}

#endif
