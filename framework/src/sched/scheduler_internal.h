/* Internal: the scheduler object, for modules that extend it (IOManager).
 *
 * An extension embeds struct sp_scheduler, fills `ops` before start and
 * overrides how an idle worker waits (`idle`) and how it is woken
 * (`tickle`). "Stopping" is the live-task count reaching zero once stop()
 * was called; an extension that owns work the count does not see (pending
 * callbacks, live timers) takes a hold for each with sp__sched_hold(). */
#ifndef SP_SCHEDULER_INTERNAL_H
#define SP_SCHEDULER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dispatch.h"
#include "fiber/fiber_internal.h"
#include "monitor.h"
#include "run_queue.h"
#include "spindle/scheduler.h"

typedef struct sp__sched_ops {
    /* Block the calling worker until tickle(worker) or other events. */
    void (*idle)(sp_scheduler_t *s, int worker);
    /* Wake `worker` out of idle(); called from any thread. */
    void (*tickle)(sp_scheduler_t *s, int worker);
    /* Optional: called by a busy worker every SP_TICK_TASKS tasks, so
     * events are polled even when the run queue never empties. */
    void (*tick)(sp_scheduler_t *s, int worker);
    /* Optional: the worker's last act, on its thread, as its loop ends. */
    void (*exit)(sp_scheduler_t *s, int worker);
    /* Optional, for monitor growth: room for `cap` workers' state (before
     * start, nothing queued); 0 or -errno. */
    int (*resize)(sp_scheduler_t *s, int cap);
    /* Optional: ready extra worker `worker` (monitor thread, before its
     * thread starts and before anyone can tickle it); 0 or -errno. */
    int (*spawn)(sp_scheduler_t *s, int worker);
    /* Optional: on a retiring extra worker's thread, with no task queued
     * or homed there: whether the extension no longer needs it (false:
     * it stays, and asks again the next time it runs out of work). */
    bool (*may_leave)(sp_scheduler_t *s, int worker);
    /* Optional, for deadline scopes (task.h): a one-shot timer on the
     * calling worker, whose callback runs on that worker's thread; 0 or
     * -errno. Its cancel fails only once the callback has run. Without
     * them a deadline is checked when a wait starts, not during it. */
    int (*timer_add)(sp_scheduler_t *s, uint64_t delay_ns, void (*fn)(void *),
                     void *arg, uint64_t *id);
    void (*timer_cancel)(sp_scheduler_t *s, uint64_t id);
} sp__sched_ops_t;

/* A busy worker ticks after at least this many tasks, and never before it
 * has run as many tasks as were queued at its last tick. */
enum { SP_TICK_TASKS = 64 };
/* Tasks a worker takes from others at once (steal.c), and how many it may
 * hold back when memory runs out: two takes' worth (worker.c, next_task). */
enum { SP_STEAL_MAX = 32, SP_HELD_MAX = 2 * SP_STEAL_MAX };

typedef struct sp__worker {
    _Alignas(64) pthread_mutex_t lock; /* guards the shared and bound queues */
    sp__run_queue_t shared;             /* unbound: others may steal */
    sp__run_queue_t bound;              /* bound here: never stolen */
    _Atomic uint64_t seq; /* numbers entries of all three queues (next_seq) */
    /* Owner only, no lock: fibers this worker woke itself (a channel, a
     * mutex, a yield), in the same order as the locked queues. */
    sp__run_queue_t local;
    _Atomic size_t n_shared, n_bound; /* lock-free peeks for idle checks */
    /* Slots of [0] shared and [1] bound promised to pushes that must not
     * fail (sp__sched_reserve): a push without one keeps them free.
     * rsv_slots (under lock) counts them all; rsv_spare those no
     * reservation holds, which a reservation takes and an unreserve gives
     * back without the lock (neither changes rsv_slots). */
    size_t rsv_slots[2];
    _Atomic size_t rsv_spare[2];
    _Atomic int idle;                  /* 1 while in (or entering) idle */
    /* Base idle: a binary semaphore. */
    pthread_mutex_t sleep_lock;
    pthread_cond_t sleep_cond;
    bool signaled;
    sp_scheduler_t *s;
    int index;
    pthread_t thread;
    sp__thread_t *fibers; /* its thread's fiber state, set as its loop starts */
    struct sp_fiber *loop_fiber; /* use_caller worker: runs the loop */
    struct sp_fiber *spare[64];  /* finished function-task fibers */
    /* Owner only: tasks this worker took but could not queue or start for
     * lack of memory; run again once its queues are empty (next_task). */
    sp__task_t held[SP_HELD_MAX];
    unsigned nheld;
    unsigned nspare;
    unsigned since_tick, tick_every; /* tasks run since / between ticks */
    /* Owner only: while it polls (no task runs then), fibers woken on
     * this worker's thread go on `woken`, to run right after the poll;
     * one that finds no room (out of memory) takes its reserved slot in
     * the bound queue instead (worker.c, collect and requeue). */
    bool collecting;
    struct sp_fiber **woken;
    unsigned nwoken, capwoken;
    unsigned woken_next; /* the next of `woken` to run, once collected */
    /* Owner only: the fiber switching out that sp__park marked PARKED
     * before the switch (worker.c, sp__park); its after_run leaves it. */
    struct sp_fiber *parked_out;
    _Atomic uint64_t tasks_run, switches, steals;
    _Atomic uint64_t polls, idle_ns; /* owner-written, like the three above */
    void *ext; /* the extension's per-worker state */
    /* Blocking-code monitor (monitor.c). The owner publishes what it runs
     * with plain relaxed stores (no lock prefix on the hot path); the
     * monitor thread samples them. run_seq is odd while a task runs and
     * grows by 2 per task, so an unchanged odd value across samples means
     * one fiber has held the worker all along. */
    _Alignas(64) _Atomic uint64_t run_seq;
    _Atomic uint64_t run_fid;      /* id of the running fiber */
    _Atomic uint64_t run_name[4];  /* its name; run_name[0] == 0: "task" */
    _Atomic int stuck;             /* set and cleared by the monitor */
    _Atomic int retiring;          /* extra worker asked to leave */
    _Atomic int exited;            /* extra worker's thread has ended */
    bool gone;                     /* under lock: no more pushes here */
    bool thread_live;              /* extra slot has a thread to join */
    _Atomic uint64_t owned;        /* owner-written: started fibers homed here */
    _Atomic long migrated_out;     /* of those, taken by other workers */
} sp__worker_t;

struct sp_scheduler {
    sp__sched_ops_t ops;
    char name[32];
    int nworkers;
    bool use_caller;
    bool started;
    bool has_io; /* an IOManager: its task fibers may use the hooks */
    _Atomic uint64_t ctl; /* live tasks | STOPPING | STOPPED */
    _Atomic unsigned rr;  /* round-robin cursor for outside submissions */
    sp__worker_t *workers;
    int cap;             /* worker slots allocated: nworkers + extras */
    sp__dispatcher_t disp; /* placement of SP_ANY_WORKER tasks */
    bool monitored;      /* a monitor samples the workers */
    bool migrate_stuck;  /* others may take a stuck worker's started fibers */
    sp__monitor_t *mon;
    /* Read on every loop of every worker when monitored: its own line. */
    _Alignas(64) _Atomic int nstuck; /* workers flagged stuck */
    _Atomic int nlive;   /* slots in use: nworkers + running extras */
    _Atomic uint64_t m_rescued, m_migrated; /* the monitor counts the rest */
};

/* A counter only its worker writes: a plain add, no locked instruction. */
static inline void sp__sched_bump(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* t->hooks_park from what it stands for: t runs a worker of a scheduler
 * with an IOManager, and sp_hook_enable(false) is not in force. Called
 * when either changes; the hooks then test one flag. */
static inline void sp__sched_hooks_update(sp__thread_t *t)
{
    const sp__worker_t *w = t->worker;
    t->hooks_park = !t->hooks_off && w && w->s->has_io;
}

/* `ctl`: live tasks | STOPPING | STOPPED (scheduler.c, "Stopping"). */
#define SP_CTL_STOPPING (1ull << 62)
#define SP_CTL_STOPPED (1ull << 63)
#define SP_CTL_COUNT(v) ((v) & (SP_CTL_STOPPING - 1))

static inline bool sp__sched_stopped(const sp_scheduler_t *s)
{
    return atomic_load(&s->ctl) & SP_CTL_STOPPED;
}

/* f->park, the scheduler's own park/wake protocol (sp__park, sp__wake):
 * RUNNING, PERMIT (woken while running), PARKING (switching out), WOKEN
 * (woken while switching out) or PARKED. Only the worker that finished
 * switching the fiber out moves PARKING -> PARKED (worker.c, after_run),
 * unless no other worker may ever run the fiber (without migrate_stuck):
 * then it parks as PARKED at once, since its own worker, the only one a
 * wake can queue it for, is busy switching it out until that is done.
 * Only a wake that sees PARKED queues the fiber (sp__sched_wake_claim),
 * so a fiber is queued exactly once per park and never runs on two
 * threads (sylar issue 24). */
enum {
    SP_PARK_RUNNING, SP_PARK_PERMIT, SP_PARK_PARKING, SP_PARK_WOKEN,
    SP_PARK_PARKED
};

/* Record a wake of f; true if f was parked and the caller must now queue
 * (or run) it. Inline: sp_wake and the waiter's delivery both run it per
 * wake. */
static inline bool sp__sched_wake_claim(struct sp_fiber *f)
{
    for (;;) {
        int p = atomic_load(&f->park);
        int next;
        switch (p) {
        case SP_PARK_RUNNING: next = SP_PARK_PERMIT; break;
        case SP_PARK_PARKING: next = SP_PARK_WOKEN; break;
        case SP_PARK_PARKED: next = SP_PARK_RUNNING; break;
        default: return false; /* a wake is already pending */
        }
        if (atomic_compare_exchange_weak(&f->park, &p, next))
            return p == SP_PARK_PARKED;
    }
}

/* worker.c, for the other files of the scheduler (never per switch). */
/* What a push does with a reservation its caller holds on the target
 * worker (sp__sched_reserve): none held; the task takes the promised slot
 * and the promise stays (a started fiber's requeue: it keeps its slot
 * while it lives); or the task takes it for good (the reservation is used
 * up, also if the push lands elsewhere). */
typedef enum { SP_RSV_NONE, SP_RSV_KEEP, SP_RSV_SPEND } sp__rsv_use_t;
/* Queue `task` on worker `target` and wake someone for it; 0 or -ENOMEM. */
int sp__sched_enqueue(sp_scheduler_t *s, int target, const sp__task_t *task,
                      bool bound, sp__rsv_use_t rsv);
/* Queue `task` on w without waking anyone; -EAGAIN if w has left. */
int sp__sched_push(sp__worker_t *w, const sp__task_t *task, bool bound);
/* Owner thread: keep `task` to run later (out of memory to queue or start
 * it); room is always there (SP_HELD_MAX, see next_task). */
static inline void sp__sched_hold_back(sp__worker_t *w, const sp__task_t *task)
{
    w->held[w->nheld++] = *task;
}

/* Reservations (scheduler.c): promise one slot in w's shared (bound false) or
 * bound queue, so that a later push there cannot fail for memory; 0 or
 * -ENOMEM. Any thread. A started fiber holds one in its home worker's bound
 * queue while it lives (its wake-ups' requeue); an armed timer or callback
 * event holds one for the task that will run its callback.
 * A spare slot is taken without the lock: it is in rsv_slots already, so
 * no push can have used it. Relaxed suffices: only the count matters, and
 * every change to it is a read-modify-write of the one variable. Without
 * a spare one, sp__sched_reserve_locked promises more under the lock. */
int sp__sched_reserve_locked(sp__worker_t *w, bool bound);
static inline int sp__sched_reserve(sp__worker_t *w, bool bound)
{
    _Atomic size_t *spare = &w->rsv_spare[bound];
    size_t n = atomic_load_explicit(spare, memory_order_relaxed);
    while (n)
        if (atomic_compare_exchange_weak_explicit(spare, &n, n - 1,
                memory_order_relaxed, memory_order_relaxed))
            return 0;
    return sp__sched_reserve_locked(w, bound);
}
static inline void sp__sched_unreserve(sp__worker_t *w, bool bound)
{
    atomic_fetch_add_explicit(&w->rsv_spare[bound], 1, memory_order_relaxed);
}
/* Under w's lock, for a push without a reservation: room in q (w's bound
 * queue or not) for one more task besides the slots promised there; the
 * slow path takes back the spare ones before it grows q. 0 or -ENOMEM. */
int sp__sched_make_room(sp__worker_t *w, sp__run_queue_t *q, bool bound);
static inline int sp__sched_room(sp__worker_t *w, sp__run_queue_t *q,
                                 bool bound)
{
    return q->count + 1 + w->rsv_slots[bound] <= q->cap
               ? 0 : sp__sched_make_room(w, q, bound);
}
/* Schedule fn(arg) as sp_schedule(s, fn, arg, worker) does, or when
 * memory is out in the slot reserved on worker `rw` (in the queue that
 * `worker` picks: bound if >= 0); uses up the reservation. Cannot fail
 * while the caller keeps s from stopping (holds it). */
int sp__sched_submit_reserved(sp_scheduler_t *s, int rw, sp_fiber_fn fn,
                              void *arg, int worker);
/* Queue woken fiber f on its worker (see requeue); self: the calling
 * thread's worker, or NULL. */
void sp__sched_requeue(sp__worker_t *self, struct sp_fiber *f);
/* The same for a fiber of self: while self polls and its woken list has
 * room, the store onto the list is all (inline: one per message). */
static inline void sp__sched_requeue_home(sp__worker_t *self,
                                          struct sp_fiber *f)
{
    if (self->collecting && self->nwoken < self->capwoken)
        self->woken[self->nwoken++] = f;
    else
        sp__sched_requeue(self, f);
}
/* A worker's thread (pthread_create), and worker 0's loop under
 * use_caller (a fiber that stop() resumes). */
void *sp__sched_thread_main(void *w);
void sp__sched_caller_loop(void *w);

/* scheduler_monitor.c: on an extra worker asked to retire, whether it may
 * leave now (then nothing more is queued on it). */
bool sp__sched_try_leave(sp__worker_t *w);
/* scheduler_monitor.c: tell the monitor which fiber w starts running
 * (while the monitor is on). */
void sp__sched_publish_start(sp__worker_t *w, const struct sp_fiber *f);

/* steal.c: work from other workers, for an idle worker (steal) or for a
 * worker the monitor flagged stuck (rescue); true with a task in *out. */
bool sp__sched_steal(sp__worker_t *w, sp__task_t *out);
bool sp__sched_rescue(sp__worker_t *w, sp__task_t *out);

/* scheduler_monitor.c: the monitor thread over this scheduler, started by
 * sp_scheduler_start() and stopped by sp_scheduler_stop() once the base
 * workers are joined; 0 or -errno. */
int sp__sched_monitor_start(sp_scheduler_t *s);
void sp__sched_monitor_stop(sp_scheduler_t *s);
/* Stop and free s's monitor, if any. */
void sp__sched_monitor_free(sp_scheduler_t *s);

/* On w's thread: how many fibers w's poll has collected so far (0 when
 * not polling), and turning round those collected since there were `from`:
 * for wakers that see events in the reverse of the order they are to run
 * in (libev calls back last in, first out). */
static inline unsigned sp__sched_ncollected(const sp__worker_t *w)
{
    return w->nwoken;
}
void sp__sched_reverse_collected(sp__worker_t *w, unsigned from);

int sp__sched_init(sp_scheduler_t *s, const char *name, int threads,
                   bool use_caller);
void sp__sched_fini(sp_scheduler_t *s);
/* Room for `cap` worker slots; before start, with nothing queued. */
int sp__sched_resize(sp_scheduler_t *s, int cap);
/* Count outside work as live so stop() waits for it. -ESHUTDOWN after
 * stop. */
int sp__sched_hold(sp_scheduler_t *s);
void sp__sched_release(sp_scheduler_t *s);
/* The worker the calling thread runs for s, or NULL. */
sp__worker_t *sp__sched_self(const sp_scheduler_t *s);
/* Claim `w` if it sleeps in idle (CAS 1 -> 0); the claimer tickles it. */
bool sp__sched_claim(sp__worker_t *w);
/* Slots in use (base workers plus running extras). */
static inline int sp__sched_nlive(const sp_scheduler_t *s)
{
    return atomic_load_explicit(&s->nlive, memory_order_acquire);
}
/* Whether new SP_ANY_WORKER work may be placed on w. */
static inline bool sp__sched_usable(const sp__worker_t *w)
{
    return !atomic_load_explicit(&w->stuck, memory_order_relaxed) &&
           !atomic_load_explicit(&w->retiring, memory_order_relaxed);
}
/* Start an extra worker in slot i == the live count (monitor thread);
 * counts it live before its thread runs. 0 or -errno. */
int sp__sched_spawn(sp_scheduler_t *s, int i);

/* A fiber's wait for one of several wakers (fd events, a timer), robust
 * against stray wakes: the fiber returns only after every waker that
 * promised to touch the waiter has finished with it.
 *   fiber:  sp__waiter_init(&w); publish &w to wakers; sp__waiter_wait(&w);
 *           withdraw from wakers that did not fire;
 *           result = sp__waiter_settle(&w);
 *   waker:  under the lock that publishes it: sp__waiter_promise(w, r);
 *           later (any thread): sp__waiter_deliver(w, wake).
 * The first promise's result is the wait's result; read it from settle,
 * once every promiser has delivered. A delivery marks the waiter done
 * before it wakes the fiber (which stays pinned meanwhile), so the woken
 * fiber finds it done at once. A delivery without a wake ends the wait the
 * next time anything wakes the fiber. */
typedef struct sp__waiter {
    sp_fiber_t *fiber;
    int result;
    _Atomic int promised;  /* wakers that will still touch us */
    _Atomic int delivered; /* wakers that are done with us */
    bool sole; /* at most one waker, ever: counts without locked adds */
    bool park; /* an sp_park(): sp_wake() ends it */
    /* What it waits on, for dumps (sp__wait_kind_t; init: SP__WAIT_OTHER)
     * and, set only by fd waits, the fd: each wait site stores its own. */
    unsigned char kind;
    int fd;
    /* How to end this wait early with `result` (an interrupt, or a wake
     * for a park), or NULL if it cannot be. Called by whoever takes the
     * wait from its fiber (sp__fiber_end_wait), it only promises: the
     * caller delivers (wakes) afterwards. SP_CANCEL_LATE: the wait had
     * ended (no promise); SP_CANCEL_PROMISED: promised, but another
     * waker's result stands; SP_CANCEL_DECIDED: `result` is the wait's. */
    int (*cancel)(struct sp__waiter *w, int result);
} sp__waiter_t;

void sp__waiter_init(sp__waiter_t *w);
/* For a wait that something else lets only one waker reach (the sync
 * primitives' claim): promise and delivery are then plain stores. */
void sp__waiter_init_sole(sp__waiter_t *w);
/* Either of the two for the calling fiber f, known to the caller: inline,
 * for the fd waits, one per message. */
static inline void sp__waiter_init_for(sp__waiter_t *w, sp_fiber_t *f,
                                       bool sole)
{
    w->fiber = f;
    w->result = 0;
    atomic_init(&w->promised, 0);
    atomic_init(&w->delivered, 0);
    w->sole = sole;
    w->park = false;
    w->kind = SP__WAIT_OTHER; /* fd: set by fd waits, read only for them */
    w->cancel = NULL;
}
/* true if this was the first promise: its result is the wait's. Inline:
 * every fd wake-up promises. */
static inline bool sp__waiter_promise(sp__waiter_t *w, int result)
{
    if (w->sole) { /* the only writer: no locked add */
        w->result = result;
        atomic_store_explicit(&w->promised, 1, memory_order_relaxed);
        return true;
    }
    if (atomic_fetch_add(&w->promised, 1) != 0)
        return false;
    w->result = result;
    return true;
}
void sp__waiter_deliver(sp__waiter_t *w, bool wake);
/* sp__waiter_deliver(w, true) on the thread of worker `self`, which the
 * caller knows: while self polls, a parked fiber of self joins the fibers
 * that run right after the poll. */
void sp__waiter_deliver_on(sp__waiter_t *w, sp__worker_t *self);
/* Park until at least one waker delivered. With a cancel function the
 * wait is published on its fiber meanwhile, and a pending interrupt ends
 * it at once. */
void sp__waiter_wait(sp__waiter_t *w);
/* Wait until every promiser delivered; returns the wait's result. */
static inline int sp__waiter_settle(sp__waiter_t *w)
{
    while (atomic_load(&w->delivered) != atomic_load(&w->promised))
        sp_yield();
    return w->result;
}
enum { SP_CANCEL_LATE, SP_CANCEL_PROMISED, SP_CANCEL_DECIDED };
/* A cancel function for waiters any number of wakers may reach: one more
 * promise. */
int sp__waiter_cancel_promise(sp__waiter_t *w, int result);

/* Take f's published wait (only an sp_park()'s when park_only) and end
 * it with result through its cancel function; true if that decided the
 * wait's outcome. f must stay allocated meanwhile (the caller holds a
 * reference, or f is known to live). */
bool sp__fiber_end_wait(struct sp_fiber *f, bool park_only, int result);
/* The fiber's pending interrupt as a wait's result (-errno), consumed;
 * 0 if none. */
int sp__fiber_take_interrupt(struct sp_fiber *f);
/* End f's published wait with its pending interrupt, which that consumes;
 * with no wait to end, the interrupt stays pending for the next one. */
void sp__fiber_deliver_interrupt(struct sp_fiber *f);

/* Joiners (handle.c): run h when f finishes; *finished says f already
 * had, and then h is not added. Cancel takes h back if still there. */
void sp__fiber_on_done(struct sp_fiber *f, sp__done_hook_t *h, bool *finished);
void sp__fiber_on_done_cancel(struct sp_fiber *f, sp__done_hook_t *h);
bool sp__fiber_is_finished(struct sp_fiber *f);
/* The worker, as f's task ends: mark it finished and run its hooks. */
void sp__fiber_finished(struct sp_fiber *f);

/* sp_run_blocking; *abandoned: an interrupt ended the wait, and fn runs on
 * (or still will) after the call returned (blocking_pool.c). */
int sp__run_blocking(void (*fn)(void *), void *arg, bool *abandoned);

/* The scheduler's own park and wake (worker.c, see f->park above): waits and
 * wakers inside the framework use these; sp_park/sp_wake are the user's
 * token on top (park.c), so one never absorbs the other's wake. */
int sp__park(void);
int sp__wake(struct sp_fiber *f);

#endif
