/* spindle-demo: the scheduler at work until the daemon replaces it. Runs
 * fibers that hand work back and forth over two workers and prints what
 * each worker did. */
#include <spindle/scheduler.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

enum { FIBERS = 8, ROUNDS = 3 };

static _Atomic int done;

static void worker_fiber(void *arg)
{
    int n = (int)(long)arg;
    for (int r = 0; r < ROUNDS; r++) {
        printf("fiber %d round %d on worker %d\n", n, r, sp_worker_index());
        sp_yield();
    }
    atomic_fetch_add(&done, 1);
}

int main(void)
{
    sp_scheduler_t *s = sp_scheduler_create("demo", 2, true);
    if (!s) {
        perror("sp_scheduler_create");
        return 1;
    }
    sp_scheduler_start(s);
    for (long i = 0; i < FIBERS; i++)
        sp_schedule(s, worker_fiber, (void *)i, SP_ANY_WORKER);
    sp_scheduler_stop(s);
    for (int w = 0; w < 2; w++) {
        sp_worker_stats_t st;
        sp_scheduler_stats(s, w, &st);
        printf("worker %d: %llu tasks, %llu switches, %llu steals\n", w,
               (unsigned long long)st.tasks_run,
               (unsigned long long)st.switches,
               (unsigned long long)st.steals);
    }
    sp_scheduler_destroy(s);
    printf("%d fibers finished\n", atomic_load(&done));
    return atomic_load(&done) == FIBERS ? 0 : 1;
}
