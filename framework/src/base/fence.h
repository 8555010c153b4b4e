/* Internal: asymmetric fences. A Dekker pair (each side stores one word,
 * then loads the other's) needs a store-load fence on both sides, a locked
 * instruction on x86. Where one side is hot (a fiber publishing its wait,
 * every message) and the other rare (an interrupt from another thread),
 * the rare side can pay for both: sp__fence_heavy() makes every running
 * thread of the process execute a full fence (membarrier(2), private
 * expedited), after which the hot side's compiler-only fence
 * (sp__fence_light) is enough. Where the kernel refuses membarrier, or
 * SPINDLE_MEMBARRIER=0 is set, sp__fence_asym() is false and the hot side
 * must keep its locked instruction. */
#ifndef SP_FENCE_H
#define SP_FENCE_H

#include <stdatomic.h>
#include <stdbool.h>

extern atomic_bool sp__fence_asym_on;

/* Register the process for sp__fence_heavy (once; any thread). Called
 * before the first fiber of a scheduler may wait. */
void sp__fence_asym_init(void);

/* Whether the heavy side is available; it never turns off again. */
static inline bool sp__fence_asym(void)
{
    return atomic_load_explicit(&sp__fence_asym_on, memory_order_relaxed);
}

/* The hot side: keeps the compiler from moving memory accesses across it;
 * the heavy side orders the hardware. */
static inline void sp__fence_light(void)
{
    atomic_signal_fence(memory_order_seq_cst);
}

/* The rare side (only when sp__fence_asym()): every thread of the process
 * that runs has executed a full fence when this returns. */
void sp__fence_heavy(void);

#endif
