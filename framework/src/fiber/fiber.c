/* Fibers: creation, resume/yield and the annotated switch.
 *
 * The fiber object sits at the top of its own stack region, so one pooled
 * region holds both and a parked fiber touches as little as one page.
 */
#include "fiber_internal.h"

#include "base/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef SP_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SP_TSAN
#include <sanitizer/tsan_interface.h>
#endif

sp__spin_t sp__fiber_registry_lock;
sp__list_t sp__fiber_registry;

static size_t fiber_footprint(void)
{
    return (sizeof(struct sp_fiber) + 63) & ~(size_t)63;
}

/* Stack colouring. Every fiber of one kind parks at the same depth, so
 * without it the hot lines of all parked stacks (the fiber object and the
 * frames a resume returns through) share one offset within their pages:
 * they compete for the same few cache sets (an L2 set is picked by address
 * bits 6-15, and pages only vary bits 12-15). Each stack's top is moved
 * down by one of SP_STACK_COLOURS cache lines, picked by hashing the
 * stack's address (a pooled stack keeps its colour). The shift stays within
 * the top page's slack, so a shallow fiber still touches a single page. */
enum { SP_STACK_COLOURS = 16 };

static size_t stack_colour(const sp__stack_t *st)
{
    uint32_t page = (uint32_t)((uintptr_t)st->lo >> 12);
    return (size_t)((page * 2654435761u) >> 28) % SP_STACK_COLOURS * 64;
}

static char *usable_lo(const struct sp_fiber *f)
{
    return f->stack.lo + f->stack.guard;
}

static size_t usable_size(const struct sp_fiber *f)
{
    return (size_t)((char *)f - usable_lo(f));
}

/* Runs after every switch, on the side that was switched back to. It is
 * only ever reached through a call made after the swap returned, so the
 * thread it reads is the one we are on now. */
static void switch_done(void *asan_fake_stack)
{
    sp__thread_t *t = sp__thread();
#ifdef SP_ASAN
    const void *old_lo;
    size_t old_size;
    __sanitizer_finish_switch_fiber(asan_fake_stack, &old_lo, &old_size);
    if (t->prev == &t->root) {
        t->root.stack.lo = (char *)old_lo;
        t->root.stack.total = old_size;
    }
#else
    (void)asan_fake_stack;
#endif
    if (t->after_switch) {
        void (*fn)(struct sp__thread *, struct sp_fiber *) = t->after_switch;
        t->after_switch = NULL;
        fn(t, t->prev);
    }
    *t->errno_at = t->current->saved_errno;
}

static void fiber_main(void)
{
    switch_done(NULL);
    struct sp_fiber *f = sp__thread()->current;
    f->fn(f->arg);
    /* f->fn may have migrated us: read the thread again. */
    sp__thread_t *t = sp__thread();
    f = t->current;
    atomic_store(&f->state, SP_FIBER_DONE);
    sp__fiber_switch(t, f, f->caller, SP_SWITCH_DONE);
    abort(); /* a finished fiber is never switched back to */
}

void sp__fiber_switch(sp__thread_t *t, struct sp_fiber *from,
                      struct sp_fiber *to, unsigned how)
{
    bool from_done = how & SP_SWITCH_DONE;
    from->saved_errno = *t->errno_at;
    t->prev = from;
    t->current = to;
    void *fake = NULL;
#ifdef SP_ASAN
    const char *lo = to->stack.lo ? usable_lo(to) : to->stack.lo;
    size_t size = to->stack.lo ? usable_size(to) : to->stack.total;
    if (to == &t->root)
        lo = t->root.stack.lo, size = t->root.stack.total;
    __sanitizer_start_switch_fiber(from_done ? NULL : &fake, lo, size);
#else
    (void)from_done;
#endif
#ifdef SP_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    if (how & SP_SWITCH_COLD)
        sp__ctx_swap_cold(&from->ctx, &to->ctx);
    else
        sp__ctx_swap(&from->ctx, &to->ctx);
    switch_done(fake);
}

void sp__fiber_keep(struct sp_fiber *f, void *p, void (*free_fn)(void *))
{
    if (f->kept)
        f->kept_free(f->kept);
    f->kept = p;
    f->kept_free = free_fn;
}

void sp__fiber_reset(struct sp_fiber *f, sp_fiber_fn fn, void *arg)
{
    sp__fiber_keep(f, NULL, NULL); /* a new life keeps nothing of the last */
    f->fn = fn;
    f->arg = arg;
    f->caller = NULL;
    atomic_store_explicit(&f->state, SP_FIBER_READY, memory_order_relaxed);
    /* A new life: one reference (its creator's, or the scheduler's for a
     * task), nothing pending. */
    atomic_store_explicit(&f->refs, 1, memory_order_relaxed);
    atomic_store_explicit(&f->uwake, 0, memory_order_relaxed);
    atomic_store_explicit(&f->intr, 0, memory_order_relaxed);
    f->deadline_ns = 0;
    f->born_ticks = sp__ticks();
    f->result = 0;
    f->finished = false;
    sp__spin_init(&f->done_lock);
#ifdef SP_ASAN
    /* A pooled stack still carries the shadow of its last fiber's frames
     * (scopes it left without returning); a new fiber starts clean. */
    ASAN_UNPOISON_MEMORY_REGION(usable_lo(f), usable_size(f));
#endif
    sp__ctx_make(&f->ctx, usable_lo(f), usable_size(f), fiber_main);
#ifdef SP_TSAN
    /* A finished fiber never returned from fiber_main and its last
     * sp__fiber_switch, so its TSan shadow call stack still holds them: a
     * reused (pooled) fiber gets a fresh TSan fiber, or that stack would grow
     * with every reuse until TSan overflows it. */
    if (f->tsan_fiber)
        __tsan_destroy_fiber(f->tsan_fiber);
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
}

sp_fiber_t *sp_fiber_create(sp_fiber_fn fn, void *arg, size_t stack_size,
                            const char *name)
{
    if (!fn) {
        errno = EINVAL;
        return NULL;
    }
    static _Atomic int installed;
    if (!atomic_load_explicit(&installed, memory_order_acquire)) {
        sp__overflow_install();
        atomic_store_explicit(&installed, 1, memory_order_release);
    }
    if (stack_size == 0)
        stack_size = SP_FIBER_DEFAULT_STACK;
    sp__stack_t st;
    int rc = sp__stack_get(&st, stack_size + fiber_footprint() +
                                    (SP_STACK_COLOURS - 1) * 64);
    if (rc < 0) {
        errno = -rc;
        return NULL;
    }
    struct sp_fiber *f = (struct sp_fiber *)(st.lo + st.total - fiber_footprint() -
                                             stack_colour(&st));
    memset(f, 0, sizeof *f);
    f->stack = st;
    f->id = sp__fiber_next_id(sp__thread());
    f->bound = -1;
    f->last_worker = -1;
    if (name) {
        strncpy(f->name, name, sizeof f->name - 1);
    }
    sp__fiber_reset(f, fn, arg);
    sp__spin_lock(&sp__fiber_registry_lock);
    sp__list_push_back(&sp__fiber_registry, &f->reg_link);
    sp__spin_unlock(&sp__fiber_registry_lock);
    return f;
}

void sp_fiber_destroy(sp_fiber_t *f)
{
    if (!f)
        return;
    sp__spin_lock(&sp__fiber_registry_lock);
    sp__list_remove(&sp__fiber_registry, &f->reg_link);
    sp__spin_unlock(&sp__fiber_registry_lock);
    sp__fiber_keep(f, NULL, NULL);
#ifdef SP_TSAN
    __tsan_destroy_fiber(f->tsan_fiber);
#endif
    sp__stack_t st = f->stack;
    sp__stack_put(&st);
}

static int resume(sp__thread_t *t, sp_fiber_t *f, unsigned how)
{
    if (!f)
        return -EINVAL;
    int s = atomic_load_explicit(&f->state, memory_order_acquire);
    if (s == SP_FIBER_RUNNING || s == SP_FIBER_DONE)
        return -EINVAL;
    f->caller = t->current;
    atomic_store_explicit(&f->state, SP_FIBER_RUNNING, memory_order_relaxed);
    sp__fiber_switch(t, t->current, f, how);
    return 0;
}

int sp_fiber_resume(sp_fiber_t *f)
{
    return resume(sp__thread(), f, 0);
}

int sp__fiber_resume_cold(sp__thread_t *t, sp_fiber_t *f)
{
    return resume(t, f, SP_SWITCH_COLD);
}

int sp__fiber_suspend(sp__thread_t *t)
{
    struct sp_fiber *self = t->current;
    atomic_store_explicit(&self->state, SP_FIBER_SUSPENDED,
                          memory_order_release);
    sp__fiber_switch(t, self, self->caller, 0);
    return 0;
}

int sp_fiber_yield(void)
{
    sp__thread_t *t = sp__thread();
    if (t->current == &t->root)
        return -EPERM;
    return sp__fiber_suspend(t);
}

sp_fiber_t *sp_fiber_current(void)
{
    sp__thread_t *t = sp__thread();
    return t->current == &t->root ? NULL : t->current;
}

uint64_t sp_fiber_id(const sp_fiber_t *f)
{
    return f->id;
}

const char *sp_fiber_name(const sp_fiber_t *f)
{
    return f->name;
}

sp_fiber_state_t sp_fiber_state(const sp_fiber_t *f)
{
    return (sp_fiber_state_t)atomic_load_explicit(&f->state,
                                                  memory_order_acquire);
}

size_t sp_fiber_stack_used(const sp_fiber_t *f)
{
    return f ? sp__stack_used(&f->stack, (const char *)f) : 0;
}

const char *sp_fiber_backend(void)
{
    return SP_CTX_BACKEND;
}
