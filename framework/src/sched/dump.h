/* Internal: the fiber dump (debug.h). dump.c snapshots the registry and
 * groups the fibers; dump_print.c writes the groups as text or JSON. */
#ifndef SP_SCHED_DUMP_H
#define SP_SCHED_DUMP_H

#include <stdint.h>
#include <stdio.h>

#include "fiber/stack.h"

enum { SP__DUMP_FRAMES = 24 };

typedef enum {
    SP__DUMP_RUNNING, SP__DUMP_RUNNABLE, SP__DUMP_PARKED, SP__DUMP_SUSPENDED,
    SP__DUMP_STATES
} sp__dump_state_t;

/* One fiber as the snapshot saw it: copied under the registry lock, so
 * nothing here points into a fiber that may be gone by print time except
 * the stack range, which stays mapped (mincore on it never faults). */
typedef struct sp__dump_rec {
    uint64_t id;
    char name[32];
    unsigned char state, kind, nframes;
    int fd, worker;
    uint64_t born, since; /* sp__ticks() */
    sp__stack_t stack;
    const char *top;
    uintptr_t pc[SP__DUMP_FRAMES];
} sp__dump_rec_t;

/* Fibers with equal state, wait kind and backtrace: recs[0..count). */
typedef struct sp__dump_group {
    sp__dump_rec_t **recs;
    size_t count;
} sp__dump_group_t;

typedef struct sp__dump {
    sp__dump_group_t *groups;
    size_t ngroups, nrecs;
    size_t by_state[SP__DUMP_STATES];
    uint64_t now;        /* sp__ticks() at the snapshot */
    double ticks_per_ns; /* to print ages and waits */
} sp__dump_t;

/* Each returns 0, or -EIO if writing failed. */
int sp__dump_print_text(FILE *out, const sp__dump_t *d);
int sp__dump_print_json(FILE *out, const sp__dump_t *d);

struct sp_fiber;
/* r's backtrace (pc, nframes) from f's saved context; f is parked or
 * runnable and may resume meanwhile. Called under the registry lock, one
 * walk at a time. By DWARF unwinding (dump_unwind.c) where libunwind is
 * found, else by frame pointers (dump_fpwalk.c). */
void sp__dump_walk(const struct sp_fiber *f, sp__dump_rec_t *r);

/* The snapshot reads fibers that run meanwhile, on purpose: racy reads
 * that TSan would report, and other fibers' stacks, where ASan's checks do
 * not apply. Only the sanitizer builds need telling. */
#if defined(SP_ASAN) || defined(SP_TSAN)
#define SP__RACY_READER __attribute__((no_sanitize("address", "thread")))
#else
#define SP__RACY_READER
#endif

#endif
