/* Fiber dump backtraces by DWARF unwinding (libunwind, x86_64), so the
 * library needs no frame pointers.
 *
 * libunwind's local unwinder reads whatever memory the unwind rules name,
 * unchecked, and the fiber may resume meanwhile: so it unwinds a private
 * copy of the fiber's stack, never the stack itself. The copy is read
 * within [saved sp, hi), the fiber's stack, and kept only if the fiber's
 * saved registers are the same after it as before. Every address the
 * rules derive comes from rsp or rbp: rsp is moved into the copy, and so
 * is rbp where it points into the stack, at the start and after each step;
 * an rbp pointing elsewhere is no frame pointer in a stack that is whole,
 * so it is replaced by one into the copy, harmless if a torn copy makes it
 * one. A frame whose sp leaves the copy ends the walk, as do
 * SP__DUMP_FRAMES frames and any error.
 *
 * Symbols stay with dladdr (dump_print.c), after the registry lock is
 * released: unw_get_proc_name would read ELF symbol tables under it. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <string.h>

#include "dump.h"
#include "scheduler_internal.h"

/* The deepest stack part walked; deeper frames are left out. */
enum { COPY_MAX = 64 * 1024 };

/* Walks run one at a time, under the registry lock (dump.c). Twice the
 * size copied: a torn copy's last frame may claim to extend past it. */
static uintptr_t copy[2 * COPY_MAX / sizeof(uintptr_t)];

typedef struct regs {
    uintptr_t at; /* where the saved state starts on the stack */
    uintptr_t ip, sp, bp, bx, r12, r13, r14, r15;
} regs_t;

#ifdef SP_CTX_UCONTEXT
/* swapcontext keeps the registers in the context (the fiber), its return
 * address as the ip. */
SP__RACY_READER static void saved_regs(const sp__ctx_t *c, regs_t *g)
{
    const volatile greg_t *r = c->uc.uc_mcontext.gregs;
    *g = (regs_t){.at = r[REG_RSP], .ip = r[REG_RIP], .sp = r[REG_RSP],
                  .bp = r[REG_RBP], .bx = r[REG_RBX], .r12 = r[REG_R12],
                  .r13 = r[REG_R13], .r14 = r[REG_R14], .r15 = r[REG_R15]};
}
#else
/* The asm switch pushes, low to high (ctx_x86_64.S, ctx_asm.c): mxcsr and
 * x87 control word, r15, r14, r13, r12, rbx, rbp, return address; its
 * context keeps only the stack pointer to them. Those words are read from
 * the copy once it is known to be good (fill_regs). */
enum { W_R15 = 1, W_R14, W_R13, W_R12, W_RBX, W_RBP, W_RET, W_WORDS };

SP__RACY_READER static void saved_regs(const sp__ctx_t *c, regs_t *g)
{
    *g = (regs_t){.at = (uintptr_t)*(void *const volatile *)&c->sp};
}

static void fill_regs(regs_t *g, const uintptr_t *w)
{
    g->ip = w[W_RET];
    g->sp = g->at + W_WORDS * sizeof *w;
    g->bp = w[W_RBP];
    g->bx = w[W_RBX];
    g->r12 = w[W_R12];
    g->r13 = w[W_R13];
    g->r14 = w[W_R14];
    g->r15 = w[W_R15];
}
#endif

/* Words [at, at + n) of the fiber's stack into copy: plain loads, not
 * memcpy, which the sanitizers would check. */
SP__RACY_READER static void copy_stack(uintptr_t at, size_t words)
{
    const volatile uintptr_t *from = (const volatile uintptr_t *)at;
    for (size_t i = 0; i < words; i++)
        copy[i] = from[i];
}

/* The copy of f's stack from its saved state up, and the saved registers;
 * the number of words copied, 0 if f switched meanwhile. */
static size_t take_copy(const struct sp_fiber *f, regs_t *g)
{
    uintptr_t lo = (uintptr_t)f->stack.lo + f->stack.guard;
    uintptr_t hi = (uintptr_t)f;
    regs_t again;
    saved_regs(&f->ctx, g);
    if (g->at < lo || g->at >= hi || g->at % sizeof(uintptr_t))
        return 0;
    size_t words = (hi - g->at) / sizeof(uintptr_t);
    if (words > COPY_MAX / sizeof(uintptr_t))
        words = COPY_MAX / sizeof(uintptr_t);
    copy_stack(g->at, words);
    atomic_thread_fence(memory_order_acquire);
    saved_regs(&f->ctx, &again);
    if (memcmp(g, &again, sizeof again) != 0)
        return 0;
#ifndef SP_CTX_UCONTEXT
    if (words < W_WORDS)
        return 0;
    fill_regs(g, copy);
#endif
    return words;
}

/* rbp as the copy's: moved into it if it points into the copied part of
 * the stack, kept if already there, else into it anyway (see above). */
static uintptr_t copy_bp(const regs_t *g, size_t words, uintptr_t bp)
{
    size_t size = words * sizeof(uintptr_t);
    if (bp - g->at < size)
        return (uintptr_t)copy + (bp - g->at);
    if (bp - (uintptr_t)copy < size)
        return bp;
    return (uintptr_t)copy;
}

static void set_context(unw_context_t *uc, const regs_t *g, size_t words)
{
    memset(uc, 0, sizeof *uc);
    greg_t *r = uc->uc_mcontext.gregs;
    r[REG_RIP] = (greg_t)g->ip;
    r[REG_RSP] = (greg_t)((uintptr_t)copy + (g->sp - g->at));
    r[REG_RBP] = (greg_t)copy_bp(g, words, g->bp);
    r[REG_RBX] = (greg_t)g->bx;
    r[REG_R12] = (greg_t)g->r12;
    r[REG_R13] = (greg_t)g->r13;
    r[REG_R14] = (greg_t)g->r14;
    r[REG_R15] = (greg_t)g->r15;
}

void sp__dump_walk(const struct sp_fiber *f, sp__dump_rec_t *r)
{
    regs_t g;
    size_t words = take_copy(f, &g);
    if (!words)
        return;
    unw_context_t uc;
    unw_cursor_t cur;
    set_context(&uc, &g, words);
    if (unw_init_local(&cur, &uc) < 0)
        return;
    uintptr_t end = (uintptr_t)copy + words * sizeof(uintptr_t);
    do {
        unw_word_t ip, sp, bp;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip ||
            unw_get_reg(&cur, UNW_REG_SP, &sp) < 0 ||
            sp < (uintptr_t)copy || sp >= end)
            break;
        r->pc[r->nframes++] = ip;
        /* The caller's rbp, as this frame saved it: the next step's rules
         * may use it as the frame pointer, which has to be the copy's. */
        if (unw_get_reg(&cur, UNW_X86_64_RBP, &bp) < 0 ||
            (copy_bp(&g, words, bp) != bp &&
             unw_set_reg(&cur, UNW_X86_64_RBP, copy_bp(&g, words, bp)) < 0))
            break;
    } while (r->nframes < SP__DUMP_FRAMES && unw_step(&cur) > 0);
}
