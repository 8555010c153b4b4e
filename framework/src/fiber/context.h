/* Internal: machine context switch. Two backends, both always declared so a
 * benchmark can link them side by side; SP_CTX_UCONTEXT picks the one the
 * library uses. A switch is an out-of-line call the optimiser cannot see
 * through, so thread-local addresses are never cached across it. */
#ifndef SP_CONTEXT_H
#define SP_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

/* Entry point of a new context; it must never return. */
typedef void (*sp_ctx_entry_fn)(void);

/* Our assembly backend: the saved registers live on the context's own stack;
 * only the stack pointer is kept here. */
typedef struct sp__asm_ctx {
    void *sp;
} sp__asm_ctx_t;

void sp__asm_ctx_make(sp__asm_ctx_t *c, void *stack_lo, size_t size,
                      sp_ctx_entry_fn entry);
/* Saves callee-saved registers and FP control state on the current stack,
 * stores the stack pointer in *from_sp and continues on to_sp. */
void sp__asm_ctx_swap(void **from_sp, void *to_sp);
/* The same, first prefetching the top of the target stack: for resuming a
 * fiber whose stack has gone cold. */
void sp__asm_ctx_swap_cold(void **from_sp, void *to_sp);
/* Prefetch only: a parked fiber's hot line and 1 KiB of stack from `frames`
 * up. Never faults, whatever the addresses. */
void sp__asm_ctx_prefetch(const void *fiber, const void *frames);
/* Prefetch only: the lines holding a and b. Never faults. */
void sp__asm_prefetch_lines(const void *a, const void *b);

/* Where a switched-out context resumes, for backtraces (sched/dump.c): the
 * frame pointer and return address its switch saved. Reads only saved
 * words lying within [lo, hi), the context's stack, so a context that runs
 * again meanwhile gives garbage, never a fault; false if they do not. */
bool sp__asm_ctx_frame(const sp__asm_ctx_t *c, uintptr_t lo, uintptr_t hi,
                       uintptr_t *fp, uintptr_t *pc);

typedef struct sp__uc_ctx {
    ucontext_t uc;
} sp__uc_ctx_t;

void sp__uc_ctx_make(sp__uc_ctx_t *c, void *stack_lo, size_t size,
                     sp_ctx_entry_fn entry);
void sp__uc_ctx_swap(sp__uc_ctx_t *from, sp__uc_ctx_t *to);
bool sp__uc_ctx_frame(const sp__uc_ctx_t *c, uintptr_t lo, uintptr_t hi,
                      uintptr_t *fp, uintptr_t *pc);

#ifdef SP_CTX_UCONTEXT
typedef sp__uc_ctx_t sp__ctx_t;
#define sp__ctx_make sp__uc_ctx_make
#define sp__ctx_frame sp__uc_ctx_frame
#define sp__ctx_swap(from, to) sp__uc_ctx_swap((from), (to))
#define sp__ctx_swap_cold(from, to) sp__uc_ctx_swap((from), (to))
#define sp__ctx_prefetch(fiber, frames) ((void)(fiber), (void)(frames))
#define sp__prefetch_lines(a, b) ((void)(a), (void)(b))
#define SP_CTX_BACKEND "ucontext"
#else
typedef sp__asm_ctx_t sp__ctx_t;
#define sp__ctx_make sp__asm_ctx_make
#define sp__ctx_frame sp__asm_ctx_frame
#define sp__ctx_swap(from, to) sp__asm_ctx_swap(&(from)->sp, (to)->sp)
#define sp__ctx_swap_cold(from, to) sp__asm_ctx_swap_cold(&(from)->sp, (to)->sp)
#define sp__ctx_prefetch sp__asm_ctx_prefetch
#define sp__prefetch_lines sp__asm_prefetch_lines
#if defined(__x86_64__)
#define SP_CTX_BACKEND "asm-x86_64"
#elif defined(__aarch64__)
#define SP_CTX_BACKEND "asm-aarch64"
#else
#error "no assembly context switch for this CPU: configure with SPINDLE_CONTEXT=ucontext"
#endif
#endif

#endif
