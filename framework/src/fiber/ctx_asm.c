/* Builds the first frame of a new context for the assembly backend, laid out
 * exactly as sp__asm_ctx_swap pops it (see ctx_x86_64.S / ctx_aarch64.S):
 * the first swap into the context "returns" into sp__asm_ctx_start, which
 * calls the entry function held in a callee-saved register. */
#include "context.h"

#include <stdint.h>
#include <string.h>

void sp__asm_ctx_start(void);

#if defined(__x86_64__)
/* low -> high: mxcsr|x87cw, r15, r14, r13, r12, rbx, rbp, return address */
enum { FRAME_WORDS = 8, SLOT_R12 = 4, SLOT_FP = 6, SLOT_RET = 7 };
#define FP_CONTROL_WORD 0x037F00001F80ull /* x87 CW 0x37F, MXCSR 0x1F80 */
#elif defined(__aarch64__)
/* low -> high: x19..x28, x29, x30, d8..d15, fpcr, pad */
enum { FRAME_WORDS = 22, SLOT_X19 = 0, SLOT_FP = 10, SLOT_X30 = 11,
       SLOT_RET = SLOT_X30, SLOT_FPCR = 20 };
#endif

#if defined(__x86_64__) || defined(__aarch64__)
void sp__asm_ctx_make(sp__asm_ctx_t *c, void *stack_lo, size_t size,
                      sp_ctx_entry_fn entry)
{
    /* 16-byte aligned top, with one spare slot so the start routine sees a
     * correctly aligned stack after the final "return". */
    uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
    uint64_t *frame = (uint64_t *)(top - 16) - FRAME_WORDS;
    memset(frame, 0, FRAME_WORDS * sizeof *frame);
#if defined(__x86_64__)
    frame[0] = FP_CONTROL_WORD;
    frame[SLOT_R12] = (uint64_t)(uintptr_t)entry;
    frame[SLOT_RET] = (uint64_t)(uintptr_t)sp__asm_ctx_start;
#else
    frame[SLOT_X19] = (uint64_t)(uintptr_t)entry;
    frame[SLOT_X30] = (uint64_t)(uintptr_t)sp__asm_ctx_start;
    frame[SLOT_FPCR] = 0; /* round to nearest, no traps: the ABI default */
#endif
    c->sp = frame;
}

/* Reads another context's stack as it may run: not for the sanitizers. */
__attribute__((no_sanitize("address", "thread")))
bool sp__asm_ctx_frame(const sp__asm_ctx_t *c, uintptr_t lo, uintptr_t hi,
                       uintptr_t *fp, uintptr_t *pc)
{
    const uint64_t *frame = *(void *const volatile *)&c->sp;
    uintptr_t at = (uintptr_t)frame;
    if (at < lo || at > hi || hi - at < FRAME_WORDS * sizeof *frame)
        return false;
    *fp = (uintptr_t)frame[SLOT_FP];
    *pc = (uintptr_t)frame[SLOT_RET];
    return true;
}
#endif
