/* The program tests/gdb/test_gdb.sh inspects with tools/gdb/spindle.py:
 * fibers parked in functions of their own, one never started, one
 * finished. Prints their ids once they are parked, then waits to be
 * killed. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <spindle/fiber.h>

/* Each must be a frame of its own in the fiber's backtrace: not inlined,
 * not a tail call (the yield's result is used), and not folded into one
 * function with the other (each stores its own value). */
static volatile int parked_in;

__attribute__((noinline)) static void park_in_read(void)
{
    parked_in = 1;
    if (sp_fiber_yield() != 0)
        abort();
}

__attribute__((noinline)) static void park_in_sleep(void)
{
    parked_in = 2;
    if (sp_fiber_yield() != 0)
        abort();
}

static void reader(void *arg)
{
    (void)arg;
    park_in_read();
}

static void sleeper(void *arg)
{
    (void)arg;
    park_in_sleep();
}

static void quick(void *arg)
{
    (void)arg;
}

int main(void)
{
    /* Under Yama's ptrace_scope=1 only an ancestor may attach; the test's
     * gdb is a sibling. */
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    sp_fiber_t *r = sp_fiber_create(reader, NULL, 0, "reader");
    sp_fiber_t *s = sp_fiber_create(sleeper, NULL, 0, "sleeper");
    sp_fiber_t *n = sp_fiber_create(quick, NULL, 0, "not-started");
    sp_fiber_t *d = sp_fiber_create(quick, NULL, 0, "finished");
    if (!r || !s || !n || !d || sp_fiber_resume(r) || sp_fiber_resume(s) ||
        sp_fiber_resume(d))
        return 1;
    printf("ready reader=%llu sleeper=%llu not-started=%llu finished=%llu\n",
           (unsigned long long)sp_fiber_id(r), (unsigned long long)sp_fiber_id(s),
           (unsigned long long)sp_fiber_id(n), (unsigned long long)sp_fiber_id(d));
    fflush(stdout);
    for (;;)
        pause();
}
