/* switch: nanoseconds per one-direction context switch.
 *
 * Each measurement pairs the timing loop with a partner context that does
 * nothing but switch straight back, so one round trip is exactly two
 * switches. The partners loop forever and stay suspended on their static
 * stacks when we are done: nothing to unwind, nothing to free. */
#include "bench.h"

#include <stdio.h>
#include <ucontext.h>

#include "context.h"

enum { PARTNER_STACK = 64 * 1024, REPS = 3 };

/* Defines `static double fn(long n)`: n round trips through `switch_there`,
 * timed. A macro rather than a function taking a callback, so each switch
 * stays a direct call: an indirect one would be part of the figure. */
#define TIMED_ROUND_TRIPS(fn, switch_there)                                   \
    static double fn(long n)                                                  \
    {                                                                         \
        double t0 = sb_now_ns();                                              \
        for (long i = 0; i < n; i++)                                          \
            switch_there;                                                     \
        return sb_now_ns() - t0;                                              \
    }

/* Defines prefix_partner_loop, a context entry that only switches back,
 * and prefix_run, the timed loop that switches into it. */
#define SWITCH_PAIR(prefix, switch_there, switch_back)                        \
    static void prefix##_partner_loop(void)                                   \
    {                                                                         \
        for (;;)                                                              \
            switch_back;                                                      \
    }                                                                         \
    TIMED_ROUND_TRIPS(prefix##_run, switch_there)

/* Partner stacks, one per raw backend: each partner stays suspended on its
 * own stack once measured. */
enum { ASM, UC, RAW, NPARTNERS };
static _Alignas(64) char partner_stack[NPARTNERS][PARTNER_STACK];

/* Our assembly backend, called directly. */
static sp__asm_ctx_t asm_main, asm_partner;
SWITCH_PAIR(asm, sp__asm_ctx_swap(&asm_main.sp, asm_partner.sp),
            sp__asm_ctx_swap(&asm_partner.sp, asm_main.sp))

/* Our ucontext backend. */
static sp__uc_ctx_t uc_main, uc_partner;
SWITCH_PAIR(uc, sp__uc_ctx_swap(&uc_main, &uc_partner),
            sp__uc_ctx_swap(&uc_partner, &uc_main))

/* glibc swapcontext with no wrapper: the peer baseline. */
static ucontext_t raw_main, raw_partner;
SWITCH_PAIR(raw, swapcontext(&raw_main, &raw_partner),
            swapcontext(&raw_partner, &raw_main))

static void raw_make(void)
{
    getcontext(&raw_partner);
    raw_partner.uc_stack.ss_sp = partner_stack[RAW];
    raw_partner.uc_stack.ss_size = PARTNER_STACK;
    raw_partner.uc_link = NULL;
    makecontext(&raw_partner, raw_partner_loop, 0);
}

/* ---- the public fiber API: what a user of sp_fiber_* pays ---------------- */

static sp_fiber_t *api_fiber;

static void api_partner_loop(void *arg)
{
    (void)arg;
    for (;;)
        sp_fiber_yield();
}

TIMED_ROUND_TRIPS(api_run, sp_fiber_resume(api_fiber))

/* ------------------------------------------------------------------------- */

static double per_switch(const char *name, sb_run_fn run, long round_trips)
{
    double ns = sb_best_of(run, round_trips, REPS) / (2.0 * (double)round_trips);
    sb_report(name, ns, "ns");
    return ns;
}

/* Boost.Context is optional; -1 when it was not built in. */
static double boost_fiber_ns(long round_trips)
{
#ifdef SB_HAVE_BOOST
    per_switch("switch.boost_fcontext", sb_boost_fcontext_run, round_trips);
    return per_switch("switch.boost_fiber", sb_boost_fiber_run, round_trips);
#else
    (void)round_trips;
    sb_note("switch: Boost.Context not found at configure time; no boost figures");
    return -1;
#endif
}

int sb_switch(long round_trips)
{
    sp__asm_ctx_make(&asm_partner, partner_stack[ASM], PARTNER_STACK,
                     asm_partner_loop);
    sp__uc_ctx_make(&uc_partner, partner_stack[UC], PARTNER_STACK,
                    uc_partner_loop);
    raw_make();
    api_fiber = sp_fiber_create(api_partner_loop, NULL, 0, "bench");
    if (!api_fiber) {
        perror("sp_fiber_create");
        return 1;
    }
    sb_note("switch: library backend %s, %ld round trips per run, best of %d",
            sp_fiber_backend(), round_trips, REPS);
    double asm_ns = per_switch("switch.asm", asm_run, round_trips);
    per_switch("switch.ucontext", uc_run, round_trips);
    double raw_ns = per_switch("switch.swapcontext", raw_run, round_trips);
    per_switch("switch.fiber_api", api_run, round_trips);
    double boost_ns = boost_fiber_ns(round_trips);
    if (boost_ns > 0)
        sb_report("switch.asm_vs_boost", asm_ns / boost_ns, "ratio");
    sb_report("switch.swapcontext_vs_asm", raw_ns / asm_ns, "ratio");
    sp_fiber_destroy(api_fiber); /* suspended: freed without unwinding */
    return 0;
}
