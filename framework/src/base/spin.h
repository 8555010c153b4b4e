/* Internal: a spin lock for critical sections of a few loads and stores
 * (an fd context's flags and armed events, taken several times per I/O
 * wait), where a pthread mutex's calls cost more than the work it guards.
 * A waiter that has spun a while yields its CPU, as the holder may have
 * been preempted. */
#ifndef SP_SPIN_H
#define SP_SPIN_H

#include <sched.h>
#include <stdatomic.h>

typedef struct sp__spin {
    atomic_flag held;
} sp__spin_t;

static inline void sp__spin_init(sp__spin_t *l)
{
    atomic_flag_clear_explicit(&l->held, memory_order_relaxed);
}

static inline void sp__spin_lock(sp__spin_t *l)
{
    for (unsigned n = 1;
         atomic_flag_test_and_set_explicit(&l->held, memory_order_acquire); n++)
        if (n % 64 == 0)
            sched_yield();
}

static inline void sp__spin_unlock(sp__spin_t *l)
{
    atomic_flag_clear_explicit(&l->held, memory_order_release);
}

#endif
