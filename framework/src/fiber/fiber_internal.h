/* Internal: the fiber object and the per-thread state shared by the fiber,
 * scheduler and (later) IOManager modules. */
#ifndef SP_FIBER_INTERNAL_H
#define SP_FIBER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/list.h"
#include "base/spin.h"
#include "context.h"
#include "spindle/fiber.h"
#include "stack.h"

struct sp_scheduler;

/* What every wake and switch touches comes first, in one cache line (with
 * the assembly backend), and what every wait touches in the next (the
 * object starts on a line): with thousands of connections a parked fiber
 * is cold, and each line it spreads over costs a miss per message. */
struct sp_fiber {
    sp__ctx_t ctx;
    struct sp_fiber *caller; /* who resumed us; yield goes back there */
    _Atomic int state; /* sp_fiber_state_t; read by other threads */
    int saved_errno;
    /* Owned by the scheduler (see scheduler.c). */
    struct sp_scheduler *sched;
    _Atomic int park;  /* park/wake protocol state */
    _Atomic int pins;  /* wakers inside sp_wake(): do not recycle yet */
    int bound;         /* worker index or SP_ANY_WORKER */
    int last_worker;   /* where it last ran, for wakes from outside */
    /* The fd watch it last armed a wait on (io_event.c), a prefetch hint
     * for its next hooked call, which most often waits on it again. */
    const void *last_watch;
    /* The second line: what every wait reads and writes (sched/: waiter.c,
     * park.c, handle.c). */
    _Atomic uintptr_t cur_wait; /* the wait in progress, for wakes and
                                 * interrupts to end it; 0 = none */
    _Atomic int wait_busy;      /* takers of cur_wait still ending it */
    _Atomic int uwake;          /* an sp_wake() not yet taken by sp_park() */
    _Atomic int intr;           /* a pending interrupt's errno; 0 = none */
    /* For dumps (sched/dump.c): what the current wait is on (sp__wait_kind_t,
     * its fd or -1) and when it began, in sp__ticks(); plain stores by the
     * waiting fiber, read racily by the dumper. */
    int wait_fd;
    unsigned char wait_kind;
    uint64_t wait_ticks;
    uint64_t deadline_ns;       /* the innermost deadline scope's (task.h);
                                 * 0 = none */
    /* Colder. */
    sp_fiber_fn fn;
    void *arg;
    uint64_t id;
    sp__stack_t stack; /* lo == NULL for a thread's root pseudo-fiber */
    void *tsan_fiber;
    bool pooled;       /* a function task's fiber: recycle, don't free */
    char name[32];
    uint64_t born_ticks;        /* sp__ticks() at create or reset */
    _Atomic int refs;           /* holders; the last one frees or recycles */
    int (*go_fn)(void *);       /* sp_go's function, run by go_main */
    int result;                 /* its result code */
    sp__spin_t done_lock;       /* guards on_done and finished */
    bool finished;              /* on_done has been run */
    sp__list_t on_done;         /* sp__done_hook_t: run when it finishes */
    sp__link_t reg_link;        /* in sp__fiber_registry */
    void *kept;                 /* sp__fiber_keep's, until the next or the end */
    void (*kept_free)(void *);
};

/* What a fiber waits on, for dumps: set by each wait site on its waiter
 * (sp__waiter_t.kind), copied to the fiber as the wait starts. */
typedef enum {
    SP__WAIT_NONE, SP__WAIT_OTHER, SP__WAIT_FD_READ, SP__WAIT_FD_WRITE,
    SP__WAIT_FD_ANY, SP__WAIT_SLEEP, SP__WAIT_MUTEX, SP__WAIT_COND,
    SP__WAIT_RWLOCK, SP__WAIT_SEM, SP__WAIT_WAITGROUP, SP__WAIT_CHAN,
    SP__WAIT_GROUP, SP__WAIT_JOIN, SP__WAIT_PARK, SP__WAIT_BLOCKING,
    SP__WAIT_DRAIN, SP__WAIT_KINDS
} sp__wait_kind_t;

/* Every fiber object that exists (created and not yet destroyed, pooled
 * ones included), for dumps and the gdb extension (tools/gdb/spindle.py),
 * which finds it by these names in a live process or a core file. Only
 * creation and destruction take the lock. */
extern sp__spin_t sp__fiber_registry_lock;
extern sp__list_t sp__fiber_registry;

/* Something to do when a fiber finishes (a join): under the fiber's
 * done_lock, claim() decides whether deliver() runs, after the lock is
 * released. Unlinked by whoever takes it off first. */
typedef struct sp__done_hook {
    sp__link_t link;
    bool linked;
    bool (*claim)(struct sp__done_hook *h);
    void (*deliver)(struct sp__done_hook *h);
} sp__done_hook_t;

/* Per-thread fiber state. `root` stands for the thread's own stack so every
 * switch is fiber-to-fiber. */
typedef struct sp__thread {
    struct sp_fiber root;
    struct sp_fiber *current;
    struct sp_fiber *prev; /* the fiber being switched away from */
    /* Set just before a switch: run once on the side switched to, with the
     * fiber switched away from (whose context is saved by then). */
    void (*after_switch)(struct sp__thread *t, struct sp_fiber *prev);
    void *worker;          /* scheduler worker run by this thread, or NULL */
    /* This thread's errno, found once: a switch saves and restores it
     * (errno is per fiber) with a load and a store, no call. */
    int *errno_at;
    bool hooks_off;        /* sp_hook_enable(false) on this thread */
    /* A worker of an IOManager with hooks_off clear: a hooked call in one
     * of its task fibers may park (sp__sched_hooks_update keeps it). */
    bool hooks_park;
    /* Names this thread among the live ones, never 0 (the fd watch lock's
     * home, io/io_watch.h). */
    uint32_t token;
    uint64_t next_id, id_end;
    void *altstack;
    /* The side stack's fiber (sp__side_call) and the call it is to run. */
    struct sp_fiber *side;
    void (*side_fn)(void *);
    void *side_arg;
} sp__thread_t;

/* Run fn(arg) on this thread's side stack and return when it returns. fn
 * must not switch fibers (park, yield, wait): the side stack is one per
 * thread. errno set by fn is not seen by the caller (it is per fiber). On
 * the caller's own stack when out of memory or already on the side stack. */
void sp__side_call(void (*fn)(void *), void *arg);

/* The calling thread's state, initialised on first use. Deliberately an
 * out-of-line call: after a switch a fiber may be on another thread, and the
 * compiler must not reuse a thread-local address computed before it. */
sp__thread_t *sp__thread(void);
/* sp__thread()'s first call on a thread: allocates its state. */
sp__thread_t *sp__thread_first(void);
/* Same, or NULL if not yet initialised; async-signal-safe. Inline (every
 * hooked call and every wait asks), so only for a function that uses the
 * value before it switches fibers, if it does, never after: a fiber that
 * switched may be on another thread. */
extern _Thread_local sp__thread_t *sp__thread_self;
static inline sp__thread_t *sp__thread_peek(void)
{
    return sp__thread_self;
}
uint64_t sp__fiber_next_id(sp__thread_t *t);

/* How to switch: DONE, the caller never comes back; COLD, `to` has been
 * parked a while and its stack is worth prefetching. */
enum { SP_SWITCH_DONE = 1, SP_SWITCH_COLD = 2 };
/* Switch from the running fiber to `to` on this thread, t. `from` must be
 * t->current. */
void sp__fiber_switch(sp__thread_t *t, struct sp_fiber *from,
                      struct sp_fiber *to, unsigned how);
/* sp_fiber_resume() on this thread, t, for a fiber that has been parked
 * (the scheduler's run of a woken fiber): the switch prefetches the stack
 * it returns through. */
int sp__fiber_resume_cold(sp__thread_t *t, sp_fiber_t *f);
/* sp_fiber_yield() for the running fiber of this thread, t (not its root
 * stack): the scheduler's park and yield know t already. Returns 0, so
 * that callers can return it: a tail call, whose frame is gone before the
 * fiber parks rather than one more cold line to return through. */
int sp__fiber_suspend(sp__thread_t *t);
/* Reuse a finished (or never run) fiber for a new function. */
void sp__fiber_reset(struct sp_fiber *f, sp_fiber_fn fn, void *arg);

/* Keep p, freed with free_fn, until f keeps another or its life ends (the
 * results non-reentrant libc calls return, per fiber: hooks/resolve.c). */
void sp__fiber_keep(struct sp_fiber *f, void *p, void (*free_fn)(void *));

/* Stack overflow reporting (overflow.c). */
void sp__overflow_install(void);

#endif
