/* The thread's side stack (fiber/side_call.c): a deep call made from a
 * fiber with a small stack runs on the side stack, not on the fiber's
 * (the fiber would overflow its guard otherwise); errno stays the caller's;
 * a nested call and a call from a thread's own stack run too. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fiber/fiber_internal.h"
#include "testutil.h"

enum { SMALL = 32 * 1024, DEEP = 100 * 1024 };

typedef struct probe {
    uintptr_t where; /* a local's address in the call */
    unsigned sum;
    int nested;
} probe_t;

static void deep(void *arg)
{
    probe_t *p = arg;
    volatile unsigned char big[DEEP]; /* far more than SMALL */
    for (size_t i = 0; i < sizeof big; i += 512)
        big[i] = (unsigned char)i;
    unsigned s = 0;
    for (size_t i = 0; i < sizeof big; i += 512)
        s += big[i];
    p->sum = s;
    p->where = (uintptr_t)&s;
    errno = EILSEQ; /* not the caller's */
}

static void inner(void *arg)
{
    ((probe_t *)arg)->nested++;
}

static void outer(void *arg)
{
    sp__side_call(inner, arg); /* already on the side stack: runs here */
    sp__side_call(inner, arg);
}

static uintptr_t fiber_local;

static void in_small_fiber(void *arg)
{
    char here;
    fiber_local = (uintptr_t)&here;
    errno = ENOENT;
    sp__side_call(deep, arg);
    ck_assert_int_eq(errno, ENOENT);
    sp__side_call(outer, arg);
}

static unsigned expected_sum(void)
{
    unsigned s = 0;
    for (size_t i = 0; i < DEEP; i += 512)
        s += (unsigned char)i;
    return s;
}

START_TEST(deep_call_runs_on_the_side_stack)
{
    probe_t p = {0};
    sp_fiber_t *f = sp_fiber_create(in_small_fiber, &p, SMALL, "small");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(sp_fiber_resume(f), 0);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    ck_assert_uint_eq(p.sum, expected_sum());
    /* The call's frame is nowhere near the fiber's stack. */
    uintptr_t d = p.where > fiber_local ? p.where - fiber_local : fiber_local - p.where;
    ck_assert_uint_gt(d, SMALL);
    ck_assert_int_eq(p.nested, 2);
    ck_assert_uint_lt(sp_fiber_stack_used(f), SMALL);
    sp_fiber_destroy(f);
}
END_TEST

static void *on_a_thread(void *arg)
{
    probe_t *p = arg;
    errno = ENOENT;
    sp__side_call(deep, p); /* from the thread's own stack */
    p->nested = errno == ENOENT;
    return NULL; /* the thread's side fiber is freed as it ends */
}

START_TEST(call_from_a_thread_and_thread_exit)
{
    for (int i = 0; i < 50; i++) {
        probe_t p = {0};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, on_a_thread, &p), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
        ck_assert_uint_eq(p.sum, expected_sum());
        ck_assert_int_eq(p.nested, 1);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("side_call");
    TCase *tc = tcase_create("side_call");
    tcase_add_test(tc, deep_call_runs_on_the_side_stack);
    tcase_add_test(tc, call_from_a_thread_and_thread_exit);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
