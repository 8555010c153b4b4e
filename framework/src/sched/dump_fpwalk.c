/* Fiber dump backtraces by frame pointers, for builds without libunwind
 * (dump_unwind.c): the wait paths are then compiled with frame pointers
 * (SPINDLE_FRAME_POINTERS). Every word read is first checked to lie on the
 * fiber's stack [lo, hi) and frame pointers must increase, so a chain that
 * changes under the walk ends it, never faults. */
#include "dump.h"
#include "scheduler_internal.h"

SP__RACY_READER void sp__dump_walk(const struct sp_fiber *f,
                                   sp__dump_rec_t *r)
{
    uintptr_t lo = (uintptr_t)f->stack.lo + f->stack.guard;
    uintptr_t hi = (uintptr_t)f;
    uintptr_t fp, pc;
    if (!sp__ctx_frame(&f->ctx, lo, hi, &fp, &pc))
        return;
    r->pc[r->nframes++] = pc;
    uintptr_t prev = lo;
    while (r->nframes < SP__DUMP_FRAMES && fp > prev && fp % sizeof fp == 0 &&
           fp < hi && hi - fp >= 2 * sizeof fp) {
        const volatile uintptr_t *frame = (const volatile uintptr_t *)fp;
        pc = frame[1];
        if (!pc)
            break;
        r->pc[r->nframes++] = pc;
        prev = fp;
        fp = frame[0];
    }
}
