/* Internal: the fiber object and the per-thread state shared by the fiber,
 * scheduler and (later) IOManager modules. */
#ifndef SP_FIBER_INTERNAL_H
#define SP_FIBER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "context.h"
#include "spindle/fiber.h"
#include "stack.h"

struct sp_scheduler;

/* What every wake and switch touches comes first, in one cache line (with
 * the assembly backend): with thousands of connections a parked fiber is
 * cold, and each line it spreads over costs a miss per message. */
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
    /* Colder. */
    sp_fiber_fn fn;
    void *arg;
    uint64_t id;
    sp__stack_t stack; /* lo == NULL for a thread's root pseudo-fiber */
    void *tsan_fiber;
    bool pooled;       /* a function task's fiber: recycle, don't free */
    char name[32];
};

/* Per-thread fiber state. `root` stands for the thread's own stack so every
 * switch is fiber-to-fiber. */
typedef struct sp__thread {
    struct sp_fiber root;
    struct sp_fiber *current;
    struct sp_fiber *prev; /* the fiber being switched away from */
    /* Set just before a switch: run once on the side switched to, with the
     * fiber switched away from (whose context is saved by then). */
    void (*after_switch)(struct sp_fiber *prev);
    void *worker;          /* scheduler worker run by this thread, or NULL */
    bool hooks_off;        /* sp_hook_enable(false) on this thread */
    uint64_t next_id, id_end;
    void *altstack;
} sp__thread_t;

/* The calling thread's state, initialised on first use. Deliberately an
 * out-of-line call: after a switch a fiber may be on another thread, and the
 * compiler must not reuse a thread-local address computed before it. */
sp__thread_t *sp__thread(void);
/* sp__thread()'s first call on a thread: allocates its state. */
sp__thread_t *sp__thread_first(void);
/* Same, or NULL if not yet initialised; async-signal-safe. */
sp__thread_t *sp__thread_peek(void);
/* errno accessors for the same reason (glibc's __errno_location is const). */
int sp__errno_get(void);
void sp__errno_set(int v);
uint64_t sp__fiber_next_id(sp__thread_t *t);

/* How to switch: DONE, the caller never comes back; COLD, `to` has been
 * parked a while and its stack is worth prefetching. */
enum { SP_SWITCH_DONE = 1, SP_SWITCH_COLD = 2 };
/* Switch from the running fiber to `to` on this thread, t. `from` must be
 * t->current. */
void sp__fiber_switch(sp__thread_t *t, struct sp_fiber *from,
                      struct sp_fiber *to, unsigned how);
/* sp_fiber_resume() for a fiber that has been parked (the scheduler's run
 * of a woken fiber): the switch prefetches the stack it returns through. */
int sp__fiber_resume_cold(sp_fiber_t *f);
/* Reuse a finished (or never run) fiber for a new function. */
void sp__fiber_reset(struct sp_fiber *f, sp_fiber_fn fn, void *arg);

/* Stack overflow reporting (overflow.c). */
void sp__overflow_install(void);

#endif
