/* wake: cross-worker park/wake round trips.
 *
 * Two workers; `ping` is bound to worker 0 and `pong` to worker 1. Ping
 * wakes pong and parks; pong, once woken, wakes ping and parks again. Each
 * wake is only issued after the other side's previous park returned, so no
 * two wakes ever merge and one round trip is exactly two cross-thread
 * wakes. When both workers run out of work they sleep, so this includes
 * the tickle (futex) cost of waking a sleeping worker, as a server would
 * see between requests.
 *
 * The floor for that is the same ping-pong between two plain threads, each
 * sleeping on its own mutex + condition variable (the scheduler's base
 * idle): reported alongside, so the scheduler's own overhead is the
 * difference between the two.
 */
#include "bench.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct pingpong {
    _Atomic(sp_fiber_t *) ping, pong;
    long round_trips;
    double elapsed_ns;
} pingpong_t;

static void pong_task(void *arg)
{
    pingpong_t *p = arg;
    atomic_store(&p->pong, sp_fiber_current());
    for (long i = 0; i < p->round_trips; i++) {
        sp_park();
        sp_wake(atomic_load(&p->ping));
    }
}

static void ping_task(void *arg)
{
    pingpong_t *p = arg;
    atomic_store(&p->ping, sp_fiber_current());
    sp_fiber_t *pong;
    while (!(pong = atomic_load(&p->pong)))
        sp_yield(); /* pong has not started yet */
    double t0 = sb_now_ns();
    for (long i = 0; i < p->round_trips; i++) {
        sp_wake(pong);
        sp_park();
    }
    p->elapsed_ns = sb_now_ns() - t0;
}

/* ---- the pthread floor -------------------------------------------------- */

typedef struct binsem {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool up;
} binsem_t;

static void binsem_post(binsem_t *s)
{
    pthread_mutex_lock(&s->lock);
    s->up = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void binsem_wait(binsem_t *s)
{
    pthread_mutex_lock(&s->lock);
    while (!s->up)
        pthread_cond_wait(&s->cond, &s->lock);
    s->up = false;
    pthread_mutex_unlock(&s->lock);
}

typedef struct thread_pingpong {
    binsem_t ping, pong;
    long round_trips;
} thread_pingpong_t;

static void *pong_thread(void *arg)
{
    thread_pingpong_t *p = arg;
    for (long i = 0; i < p->round_trips; i++) {
        binsem_wait(&p->pong);
        binsem_post(&p->ping);
    }
    return NULL;
}

/* Elapsed ns for the round trips, or -1 if the thread did not start. */
static double pthread_floor_ns(long round_trips)
{
    thread_pingpong_t p = {
        .ping = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false},
        .pong = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false},
        .round_trips = round_trips,
    };
    pthread_t t;
    if (pthread_create(&t, NULL, pong_thread, &p) != 0)
        return -1;
    double t0 = sb_now_ns();
    for (long i = 0; i < round_trips; i++) {
        binsem_post(&p.pong);
        binsem_wait(&p.ping);
    }
    double ns = sb_now_ns() - t0;
    pthread_join(t, NULL);
    return ns;
}

/* ------------------------------------------------------------------------- */

int sb_wake(long round_trips)
{
    pingpong_t p = {.round_trips = round_trips};
    sp_scheduler_t *s = sb_sched_new("wake", 2, false);
    int rc = sp_schedule(s, pong_task, &p, 1);
    if (rc == 0)
        rc = sp_schedule(s, ping_task, &p, 0);
    int stop_rc = sb_sched_end(s);
    if (rc < 0 || stop_rc < 0 || round_trips <= 0)
        return 1;
    sb_note("wake: %ld round trips between bound fibers on workers 0 and 1",
            round_trips);
    sb_report("wake.rate", 2.0 * (double)round_trips / p.elapsed_ns * 1e9,
              "wakes/s");
    sb_report("wake.round_trip", p.elapsed_ns / (double)round_trips, "ns");
    double floor_ns = pthread_floor_ns(round_trips);
    if (floor_ns > 0)
        sb_report("wake.pthread_round_trip", floor_ns / (double)round_trips,
                  "ns");
    return 0;
}
