/* The program tests/gdb/test_gdb.sh inspects with tools/gdb/spindle.py:
 * fibers parked in functions of their own, one never started, one
 * finished, and one running (the main thread waits in it). */
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

/* The running fiber: reports the others, then waits to be killed. */
static void wait_forever(void *arg)
{
    sp_fiber_t **all = arg;
    printf("ready reader=%llu sleeper=%llu not-started=%llu finished=%llu "
           "running=%llu\n",
           (unsigned long long)sp_fiber_id(all[0]), (unsigned long long)sp_fiber_id(all[1]),
           (unsigned long long)sp_fiber_id(all[2]), (unsigned long long)sp_fiber_id(all[3]),
           (unsigned long long)sp_fiber_id(all[4]));
    fflush(stdout);
    for (;;)
        pause();
}

int main(void)
{
    /* Under Yama's ptrace_scope=1 only an ancestor may attach; the test's
     * gdb is a sibling. */
#ifdef PR_SET_PTRACER
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    sp_fiber_t *all[5];
    all[0] = sp_fiber_create(reader, NULL, 0, "reader");
    all[1] = sp_fiber_create(sleeper, NULL, 0, "sleeper");
    all[2] = sp_fiber_create(quick, NULL, 0, "not-started");
    all[3] = sp_fiber_create(quick, NULL, 0, "finished");
    all[4] = sp_fiber_create(wait_forever, all, 0, "running");
    for (int i = 0; i < 5; i++)
        if (!all[i])
            return 1;
    sp_fiber_resume(all[0]);
    sp_fiber_resume(all[1]);
    sp_fiber_resume(all[3]);
    sp_fiber_resume(all[4]);
    return 1; /* not reached: "running" never yields */
}
