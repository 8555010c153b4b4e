/* The library loaded with dlopen() by a program that does not link it: its
 * thread-locals use the initial-exec model, which only works while they fit
 * glibc's static TLS reserve. Fibers then run on the main thread and on a
 * new thread (each thread's state is reached through its TLS pointer). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "spindle/fiber.h"
#include "testutil.h"

typedef sp_fiber_t *(*create_fn)(sp_fiber_fn, void *, size_t, const char *);
typedef int (*resume_fn)(sp_fiber_t *);
typedef int (*yield_fn)(void);
typedef void (*destroy_fn)(sp_fiber_t *);

static create_fn create;
static resume_fn resume;
static yield_fn yield;
static destroy_fn destroy;

static void body(void *arg)
{
    int *steps = arg;
    (*steps)++;
    yield();
    (*steps)++;
}

static void *run_fiber(void *unused)
{
    (void)unused;
    int steps = 0;
    sp_fiber_t *f = create(body, &steps, 0, "loaded");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(resume(f), 0);
    ck_assert_int_eq(steps, 1);
    ck_assert_int_eq(resume(f), 0);
    ck_assert_int_eq(steps, 2);
    destroy(f);
    return NULL;
}

START_TEST(dlopen_and_run_fibers)
{
    void *lib = dlopen(SP_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib, "dlopen: %s", dlerror());
    create = (create_fn)dlsym(lib, "sp_fiber_create");
    resume = (resume_fn)dlsym(lib, "sp_fiber_resume");
    yield = (yield_fn)dlsym(lib, "sp_fiber_yield");
    destroy = (destroy_fn)dlsym(lib, "sp_fiber_destroy");
    ck_assert(create && resume && yield && destroy);
    run_fiber(NULL);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_fiber, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dlopen");
    TCase *tc = tcase_create("dlopen");
    tcase_add_test(tc, dlopen_and_run_fibers);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
