/* Out of memory, white-box (base/alloc.h's fault injection): the queue
 * slots and records that a wake-up, a timer's expiry and a callback
 * event's delivery need are reserved when the wait, timer or event is
 * armed, so running out of memory is that call's -ENOMEM and never an
 * abort in the loop. Each test makes the reservation's allocation fail
 * (sp__alloc_fail_after), checks the error, then that the call succeeds
 * once allocations work again and that stop() returns. Linked with the
 * static library: the switch is not exported. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/scheduler.h>
#include <spindle/timer.h>

#include "base/alloc.h"
#include "sched/scheduler_internal.h"
#include "testutil.h"

static sem_t done;

static void setup(void)
{
    sem_init(&done, 0, 0);
}

static void teardown(void)
{
    sp__alloc_fail_after(-1);
    sem_destroy(&done);
}

static void sem_wait_5s(sem_t *s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 5;
    ck_assert_msg(sem_timedwait(s, &t) == 0, "not posted within 5 s");
}

static void post(void *arg)
{
    (void)arg;
    sem_post(&done);
}

/* Reservations held on w's queue (bound or shared): the promised slots
 * but the spare ones. */
static size_t held(sp__worker_t *w, bool bound)
{
    pthread_mutex_lock(&w->lock);
    size_t n = w->rsv_slots[bound] - atomic_load(&w->rsv_spare[bound]);
    pthread_mutex_unlock(&w->lock);
    return n;
}

/* Promise every free slot of w's queue (bound or shared), so that only a
 * reserved push finds room without growing it; how many were promised. */
static size_t fill_room(sp__worker_t *w, bool bound)
{
    sp__run_queue_t *q = bound ? &w->bound : &w->shared;
    size_t n = 0;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        bool full = q->cap && q->count + w->rsv_slots[bound] >= q->cap &&
                    !atomic_load(&w->rsv_spare[bound]);
        pthread_mutex_unlock(&w->lock);
        if (full)
            return n;
        ck_assert_int_eq(sp__sched_reserve(w, bound), 0);
        n++;
    }
}

/* Wait (5 s at most) until w's promised slots number n: a task's fiber
 * gives its own back as it ends, just after its last act. */
static void wait_rsv(sp__worker_t *w, bool bound, size_t n)
{
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && held(w, bound) != n; i++)
        nanosleep(&ms, NULL);
    ck_assert_uint_eq(held(w, bound), n);
}

static void unfill(sp__worker_t *w, bool bound, size_t n)
{
    while (n--)
        sp__sched_unreserve(w, bound);
}

/* ---- the scheduler: sp_schedule, wake-ups, a task's home -------------- */

/* A task that cannot be queued is the caller's -ENOMEM, and counts for
 * nothing: stop() still returns. */
START_TEST(schedule_out_of_memory_is_enomem)
{
    sp_scheduler_t *s = sp_scheduler_create("oom", 1, false);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    sp__alloc_fail_after(0);
    ck_assert_int_eq(sp_schedule(s, post, NULL, SP_ANY_WORKER), -ENOMEM);
    ck_assert_int_eq(sp_schedule(s, post, NULL, 0), -ENOMEM);
    sp__alloc_fail_after(-1);
    ck_assert_int_eq(sp_schedule(s, post, NULL, SP_ANY_WORKER), 0);
    sem_wait_5s(&done);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
}
END_TEST

enum { PARKERS = 64 };
static sp_fiber_t *parked[PARKERS];
static _Atomic int nparked;

static void parker(void *arg)
{
    parked[(long)arg] = sp_fiber_current();
    atomic_fetch_add(&nparked, 1);
    ck_assert_int_eq(sp_park(), 0);
    sem_post(&done);
}

/* Parked fibers are woken without memory (each reserved its requeue slot
 * when it first ran); a new task that finds no memory for its own slot
 * waits, held by its worker, and runs as soon as room frees up. */
START_TEST(wakes_need_no_memory_and_a_task_waits_for_room)
{
    sp_scheduler_t *s = sp_scheduler_create("oom", 1, false);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    atomic_store(&nparked, 0);
    for (long i = 0; i < PARKERS; i++)
        ck_assert_int_eq(sp_schedule(s, parker, (void *)i, SP_ANY_WORKER), 0);
    struct timespec tick = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&nparked) < PARKERS; i++)
        nanosleep(&tick, NULL);
    ck_assert_int_eq(atomic_load(&nparked), PARKERS);
    sp__worker_t *w = &s->workers[0];
    size_t extra = fill_room(w, true);
    sp__alloc_fail_after(0);
    /* Queued: the shared queue has room. Its fiber's home slot does not. */
    ck_assert_int_eq(sp_schedule(s, post, NULL, SP_ANY_WORKER), 0);
    for (int i = 0; i < 20; i++)
        nanosleep(&tick, NULL);
    ck_assert_int_eq(sem_trywait(&done), -1);
    /* Every parked fiber wakes, runs and ends with allocations failing;
     * each that ends gives its slot back, and the waiting task runs. */
    for (int i = 0; i < PARKERS; i++)
        ck_assert_int_eq(sp_wake(parked[i]), 0);
    for (int i = 0; i < PARKERS + 1; i++)
        sem_wait_5s(&done);
    sp__alloc_fail_after(-1);
    unfill(w, true, extra);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
}
END_TEST

static sem_t blocked, unblock;

static void block_thread(void *arg)
{
    (void)arg;
    sem_post(&blocked);
    sem_wait(&unblock); /* the whole worker thread stops here */
}

static _Atomic int ran;

static void count_run(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

/* A started scheduler of n workers, with room made in worker 0's shared
 * queue and that worker's thread then held in block_thread until unblock
 * is posted. */
static sp_scheduler_t *start_blocked(int n)
{
    sp_scheduler_t *s = sp_scheduler_create("oom", n, false);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(sp_scheduler_start(s), 0);
    sem_init(&blocked, 0, 0);
    sem_init(&unblock, 0, 0);
    atomic_store(&ran, 0);
    sp__worker_t *w = &s->workers[0];
    unfill(w, false, fill_room(w, false));
    ck_assert_int_eq(sp_schedule(s, block_thread, NULL, 0), 0);
    sem_wait_5s(&blocked);
    return s;
}

/* Queue n count_run tasks on worker 0's shared queue, as a push without a
 * reservation. */
static void queue_counted(sp_scheduler_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(sp__sched_hold(s), 0);
        sp__task_t t = {.fn = count_run};
        ck_assert_int_eq(sp__sched_enqueue(s, 0, &t, false, SP_RSV_NONE), 0);
    }
}

/* Let worker 0 go, wait until n count_run tasks ran, and stop. */
static void unblock_and_stop(sp_scheduler_t *s, int n)
{
    sp__alloc_fail_after(-1);
    sem_post(&unblock);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&ran) < n; i++)
        nanosleep(&ms, NULL);
    ck_assert_int_eq(atomic_load(&ran), n);
    ck_assert_int_eq(sp_scheduler_stop(s), 0);
    sp_scheduler_destroy(s);
    sem_destroy(&blocked);
    sem_destroy(&unblock);
}

enum { STOLEN = 16 };

/* An idle worker that steals tasks it then has no memory to queue or
 * start holds them, and runs them all once memory is back. */
START_TEST(stolen_tasks_are_held_without_memory)
{
    sp_scheduler_t *s = start_blocked(2);
    sp__worker_t *w = &s->workers[0];
    sp__alloc_fail_after(0);
    queue_counted(s, STOLEN);
    /* Worker 0 is blocked: only worker 1, idle, takes from its queue. */
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&w->n_shared) == STOLEN; i++)
        nanosleep(&ms, NULL);
    ck_assert_uint_lt(atomic_load(&w->n_shared), STOLEN);
    ck_assert_int_eq(atomic_load(&ran), 0);
    unblock_and_stop(s, STOLEN);
}
END_TEST

/* Slots given back by reservations stay promised, spare, for the next
 * reservation to take without the lock; a push that finds no other room
 * takes them back instead of failing for memory. */
START_TEST(pushes_take_back_spare_slots)
{
    sp_scheduler_t *s = start_blocked(1);
    sp__worker_t *w = &s->workers[0];
    size_t n = fill_room(w, false); /* the whole empty shared queue */
    unfill(w, false, n);
    ck_assert_uint_eq(held(w, false), 0);
    sp__alloc_fail_after(0);
    queue_counted(s, n);
    ck_assert_int_eq(sp_schedule(s, count_run, NULL, SP_ANY_WORKER), -ENOMEM);
    ck_assert_int_eq(sp__sched_reserve(w, false), -ENOMEM);
    unblock_and_stop(s, (int)n);
}
END_TEST

enum { RACERS = 2, RACE_ROUNDS = 20000 };
static sp_scheduler_t *race_sched;

/* From outside the scheduler: hold one to three slots of worker 0's bound
 * queue at a time while pushing a task there; the number of failures. */
static void *reserve_race(void *arg)
{
    (void)arg;
    sp__worker_t *w = &race_sched->workers[0];
    intptr_t failed = 0;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        int n = i % 3 + 1;
        for (int k = 0; k < n; k++)
            failed += sp__sched_reserve(w, true) != 0;
        failed += sp_schedule(race_sched, count_run, NULL, 0) != 0;
        for (int k = 0; k < n; k++)
            sp__sched_unreserve(w, true);
    }
    return (void *)failed;
}

/* Reservations taken and given back on several threads at once, while
 * pushes fill the queue and its tasks' fibers take and give back their
 * own: no promise is lost or made twice, and the promised slots and the
 * queued tasks fit the queue once all is done. */
START_TEST(reservations_race_with_pushes)
{
    race_sched = sp_scheduler_create("oom", 2, false);
    ck_assert_ptr_nonnull(race_sched);
    ck_assert_int_eq(sp_scheduler_start(race_sched), 0);
    atomic_store(&ran, 0);
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, reserve_race, NULL), 0);
    for (int i = 0; i < RACERS; i++) {
        void *failed;
        ck_assert_int_eq(pthread_join(t[i], &failed), 0);
        ck_assert_ptr_null(failed);
    }
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&ran) < RACERS * RACE_ROUNDS; i++)
        nanosleep(&ms, NULL);
    ck_assert_int_eq(atomic_load(&ran), RACERS * RACE_ROUNDS);
    sp__worker_t *w = &race_sched->workers[0];
    wait_rsv(w, true, 0);
    pthread_mutex_lock(&w->lock);
    ck_assert_uint_le(w->bound.count + w->rsv_slots[true], w->bound.cap);
    pthread_mutex_unlock(&w->lock);
    ck_assert_int_eq(sp_scheduler_stop(race_sched), 0);
    sp_scheduler_destroy(race_sched);
}
END_TEST

/* ---- the IOManager: fd waits, callback events ------------------------ */

/* The IOManager tests' fixture: one worker (w0) and a pipe. */
static sp_iomanager_t *io;
static sp__worker_t *w0;
static int pipe_fds[2];

static void setup_io(void)
{
    setup();
    ck_assert_int_eq(pipe(pipe_fds), 0);
    io = sp_iomanager_create("oom", 1, false);
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(sp_iomanager_start(io), 0);
    w0 = &sp_iomanager_scheduler(io)->workers[0];
}

/* The end of each test: nothing left armed or queued keeps stop() waiting. */
static void stop_io(void)
{
    ck_assert_int_eq(sp_iomanager_stop(io), 0);
    sp_iomanager_destroy(io);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

static void wait_without_memory(void *arg)
{
    (void)arg;
    sp__alloc_fail_after(0); /* the timer slot for this wait's timeout */
    int rc = sp_io_wait(pipe_fds[0], SP_IO_READ, 1000);
    sp__alloc_fail_after(-1);
    ck_assert_int_eq(rc, -ENOMEM);
    ck_assert_int_eq(sp_io_wait(pipe_fds[0], SP_IO_READ, 1000), -ETIMEDOUT);
    sem_post(&done);
}

START_TEST(io_wait_out_of_memory_is_enomem)
{
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    ck_assert_int_eq(sp_schedule(s, wait_without_memory, NULL, 0), 0);
    sem_wait_5s(&done);
    stop_io();
}
END_TEST

static void wait_for_byte(void *arg)
{
    (void)arg;
    ck_assert_int_eq(sp_io_wait(pipe_fds[0], SP_IO_READ, -1), 0);
    char c;
    ck_assert_int_eq(read(pipe_fds[0], &c, 1), 1);
    sem_post(&done);
}

/* A fiber that the poll finds ready is woken without memory: with no room
 * for the worker's list of fibers to run after the poll (this IOManager's
 * first poll wake-up: the list has none yet) nor in its queues, it takes
 * the slot it reserved in its worker's bound queue when it first ran. */
START_TEST(io_wake_in_the_poll_needs_no_memory)
{
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    ck_assert_int_eq(sp_schedule(s, wait_for_byte, NULL, 0), 0);
    sp_io_stats_t st = {0};
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && st.fd_waits != 1; i++) {
        ck_assert_int_eq(sp_iomanager_stats(io, 0, &st), 0);
        if (st.fd_waits != 1)
            nanosleep(&ms, NULL);
    }
    ck_assert_int_eq(st.fd_waits, 1); /* parked, or about to: then it polls */
    size_t extra = fill_room(w0, true);
    sp__alloc_fail_after(0);
    ck_assert_int_eq(write(pipe_fds[1], "x", 1), 1);
    sem_wait_5s(&done);
    sp__alloc_fail_after(-1);
    unfill(w0, true, extra);
    stop_io();
}
END_TEST

static _Atomic int cb_result = 1;

static void on_event(void *arg, int result)
{
    (void)arg;
    atomic_store(&cb_result, result);
    sem_post(&done);
}

static sp_fiber_t *_Atomic long_lived;

static void park_long(void *arg)
{
    (void)arg;
    atomic_store(&long_lived, sp_fiber_current());
    sem_post(&done);
    sp_park();
    sem_post(&done);
}

/* sp_io_add makes the event's record and its task's queue slot: either
 * failing is its -ENOMEM; once armed, the event is delivered and its
 * callback runs with every allocation failing. */
START_TEST(io_callback_reserves_when_armed)
{
    sp_scheduler_t *s = sp_iomanager_scheduler(io);
    sp__worker_t *w = w0;
    sp__alloc_fail_after(0); /* the record */
    ck_assert_int_eq(sp_io_add(io, pipe_fds[0], SP_IO_READ, on_event, NULL), -ENOMEM);
    sp__alloc_fail_after(1); /* the slot: the shared queue has none yet */
    ck_assert_int_eq(sp_io_add(io, pipe_fds[0], SP_IO_READ, on_event, NULL), -ENOMEM);
    ck_assert_uint_eq(held(w, false), 0);
    sp__alloc_fail_after(-1);
    /* A fiber that lives on: room in the bound queue for the callback's. */
    ck_assert_int_eq(sp_schedule(s, park_long, NULL, 0), 0);
    sem_wait_5s(&done);
    ck_assert_int_eq(sp_io_add(io, pipe_fds[0], SP_IO_READ, on_event, NULL), 0);
    size_t extra = fill_room(w, false); /* only the event's slot is left */
    sp__alloc_fail_after(0);
    ck_assert_int_eq(write(pipe_fds[1], "x", 1), 1);
    sem_wait_5s(&done);
    ck_assert_int_eq(atomic_load(&cb_result), 0);
    sp__alloc_fail_after(-1);
    unfill(w, false, extra);
    ck_assert_uint_eq(held(w, false), 0);
    ck_assert_int_eq(sp_wake(atomic_load(&long_lived)), 0);
    sem_wait_5s(&done);
    stop_io();
}
END_TEST

/* ---- timers ------------------------------------------------------------ */

/* A one-shot timer's task slot, and a conditional one's call record, are
 * made by sp_timer_add: either failing is its -ENOMEM, nothing stays
 * armed or reserved, and stop() returns. */
START_TEST(timer_add_out_of_memory_is_enomem)
{
    sp__worker_t *w = w0;
    sp_token_t *alive = sp_token_create();
    ck_assert_ptr_nonnull(alive);
    sp_timer_id_t id;
    sp__alloc_fail_after(0); /* the queue slot: none made yet */
    ck_assert_int_eq(sp_timer_add(io, 1000, post, NULL, 0, NULL, &id), -ENOMEM);
    sp__alloc_fail_after(1); /* the slot, then the call record */
    ck_assert_int_eq(sp_timer_add(io, 1000, post, NULL, 0, alive, &id), -ENOMEM);
    ck_assert_uint_eq(held(w, true), 0);
    sp__alloc_fail_after(-1);
    ck_assert_int_eq(sp_timer_add(io, 1000, post, NULL, 0, alive, &id), 0);
    sem_wait_5s(&done);
    wait_rsv(w, true, 0);
    ck_assert_int_eq(sp_timer_add(io, 1000000, post, NULL, 0, NULL, &id), 0);
    ck_assert_uint_eq(held(w, true), 1);
    ck_assert_int_eq(sp_timer_cancel(io, id), 0); /* gives its slot back */
    ck_assert_uint_eq(held(w, true), 0);
    sp_token_kill(alive);
    stop_io();
}
END_TEST

static _Atomic int ticks;

static void tick(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ticks, 1);
}

/* Expiry needs no memory: one-shot timers, plain and conditional, fire
 * with every allocation failing and only their reserved slots free; a
 * recurring timer skips the periods it finds no memory for, then fires
 * again. */
START_TEST(timer_expiry_needs_no_memory)
{
    sp__worker_t *w = w0;
    sp_token_t *alive = sp_token_create();
    ck_assert_ptr_nonnull(alive);
    atomic_store(&ticks, 0);
    sp_timer_id_t id, rec;
    ck_assert_int_eq(sp_timer_add(io, 20000, post, NULL, 0, NULL, &id), 0);
    ck_assert_int_eq(sp_timer_add(io, 20000, post, NULL, 0, alive, &id), 0);
    ck_assert_int_eq(sp_timer_add(io, 1000, tick, NULL, SP_TIMER_RECURRING, NULL, &rec), 0);
    size_t extra = fill_room(w, true);
    sp__alloc_fail_after(0);
    sem_wait_5s(&done);
    sem_wait_5s(&done);
    sp__alloc_fail_after(-1);
    unfill(w, true, extra);
    int before = atomic_load(&ticks);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&ticks) == before; i++)
        nanosleep(&ms, NULL);
    ck_assert_int_gt(atomic_load(&ticks), before);
    ck_assert_int_eq(sp_timer_cancel(io, rec), 0);
    sp_token_kill(alive);
    stop_io();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oom_internal");
    SP_TEST_CASE(s, "scheduler", 60, setup, teardown, schedule_out_of_memory_is_enomem,
                 wakes_need_no_memory_and_a_task_waits_for_room,
                 stolen_tasks_are_held_without_memory, pushes_take_back_spare_slots,
                 reservations_race_with_pushes);
    SP_TEST_CASE(s, "iomanager", 60, setup_io, teardown, io_wait_out_of_memory_is_enomem,
                 io_wake_in_the_poll_needs_no_memory, io_callback_reserves_when_armed);
    SP_TEST_CASE(s, "timers", 60, setup_io, teardown, timer_add_out_of_memory_is_enomem,
                 timer_expiry_needs_no_memory);
    return sp_test_run(s);
}
