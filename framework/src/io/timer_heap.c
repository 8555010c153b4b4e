/* The timer heap: one min-heap per worker, ordered by (deadline,
 * sequence) so equal deadlines fire in insertion order. A timer id packs the owning worker, the
 * slot index and the slot's generation; a slot's generation changes when it
 * is freed, so stale ids are detected under the owner's lock.
 *
 * Every armed timer holds its scheduler alive (sp__sched_hold), which is
 * what makes IOManager stop() wait for live timers.
 *
 * Memory: a one-shot timer whose callback runs as a task gets, when it is
 * added, a slot in its worker's bound queue (sp__sched_reserve) and, if
 * conditional, the record of its call; expiry then needs no memory. A
 * recurring timer's period that finds no memory for its task is skipped
 * (the next one tries again).
 */
#include "timer_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "sched/scheduler_internal.h"
#include "spindle/timer.h"

enum { EXPIRE_BATCH = 256 };

#define ID_WORKER_BITS 10
#define ID_SLOT_BITS 26
#define ID_GEN_BITS 28
#define NO_SLOT UINT32_MAX

struct sp_token {
    _Atomic int refs;
    _Atomic bool alive;
};

struct cond_call;

struct sp__timer_slot {
    uint64_t deadline, start, period, seq; /* ns, monotonic */
    sp_timer_fn fn;
    void *arg;
    sp_token_t *alive;
    struct cond_call *call; /* one-shot conditional: made when added */
    uint32_t gen;
    uint32_t heap_pos; /* NO_SLOT when not in the heap (free) */
    uint32_t next_free;
    bool recurring;
    bool inline_cb;
};

uint64_t sp_now_ns(void)
{
    return sp__now_ns();
}

/* ---- tokens ------------------------------------------------------------- */

sp_token_t *sp_token_create(void)
{
    sp_token_t *t = malloc(sizeof *t);
    if (!t) {
        errno = ENOMEM;
        return NULL;
    }
    atomic_init(&t->refs, 1);
    atomic_init(&t->alive, true);
    return t;
}

static void token_ref(sp_token_t *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

static void token_unref(sp_token_t *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        free(t);
}

static bool token_alive(sp_token_t *t)
{
    return !t || atomic_load_explicit(&t->alive, memory_order_acquire);
}

void sp_token_kill(sp_token_t *t)
{
    if (!t)
        return;
    atomic_store_explicit(&t->alive, false, memory_order_release);
    token_unref(t);
}

/* ---- heap --------------------------------------------------------------- */

static bool earlier(const sp__timer_heap_t *h, uint32_t a, uint32_t b)
{
    const sp__timer_slot_t *x = &h->slots[a], *y = &h->slots[b];
    return x->deadline < y->deadline ||
           (x->deadline == y->deadline && x->seq < y->seq);
}

static void place(sp__timer_heap_t *h, uint32_t pos, uint32_t slot)
{
    h->heap[pos] = slot;
    h->slots[slot].heap_pos = pos;
}

static void sift_up(sp__timer_heap_t *h, uint32_t pos)
{
    uint32_t slot = h->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!earlier(h, slot, h->heap[parent]))
            break;
        place(h, pos, h->heap[parent]);
        pos = parent;
    }
    place(h, pos, slot);
}

static void sift_down(sp__timer_heap_t *h, uint32_t pos)
{
    uint32_t slot = h->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= h->nheap)
            break;
        if (c + 1 < h->nheap && earlier(h, h->heap[c + 1], h->heap[c]))
            c++;
        if (!earlier(h, h->heap[c], slot))
            break;
        place(h, pos, h->heap[c]);
        pos = c;
    }
    place(h, pos, slot);
}

static void heap_remove(sp__timer_heap_t *h, uint32_t slot)
{
    uint32_t pos = h->slots[slot].heap_pos;
    uint32_t last = h->heap[--h->nheap];
    atomic_store_explicit(&h->armed, h->nheap, memory_order_relaxed);
    h->slots[slot].heap_pos = NO_SLOT;
    if (pos == h->nheap)
        return;
    place(h, pos, last);
    sift_down(h, pos);
    sift_up(h, h->slots[last].heap_pos);
}

/* Deadline changed: restore heap order around the slot. */
static void heap_update(sp__timer_heap_t *h, uint32_t slot)
{
    h->slots[slot].seq = h->seq++;
    sift_up(h, h->slots[slot].heap_pos);
    sift_down(h, h->slots[slot].heap_pos);
}

/* ---- slots -------------------------------------------------------------- */

static int slot_alloc(sp__timer_heap_t *h, uint32_t *out)
{
    if (h->free_head != NO_SLOT) {
        *out = h->free_head;
        h->free_head = h->slots[*out].next_free;
        return 0;
    }
    if (h->nslots == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 256;
        if (cap > (1u << ID_SLOT_BITS))
            return -ENOMEM;
        sp__timer_slot_t *s = sp__realloc(h->slots, cap * sizeof *s);
        if (!s)
            return -ENOMEM;
        h->slots = s;
        uint32_t *hp = sp__realloc(h->heap, cap * sizeof *hp);
        if (!hp)
            return -ENOMEM;
        h->heap = hp;
        h->cap = cap;
    }
    *out = h->nslots++;
    h->slots[*out].gen = 1;
    return 0;
}

static void slot_free(sp__timer_heap_t *h, uint32_t slot)
{
    sp__timer_slot_t *s = &h->slots[slot];
    s->gen = (s->gen + 1) & ((1u << ID_GEN_BITS) - 1);
    if (!s->gen)
        s->gen = 1;
    s->next_free = h->free_head;
    h->free_head = slot;
}

static sp_timer_id_t make_id(const sp__timer_heap_t *h, uint32_t slot)
{
    return ((uint64_t)h->slots[slot].gen << (ID_WORKER_BITS + ID_SLOT_BITS)) |
           ((uint64_t)slot << ID_WORKER_BITS) | (uint64_t)h->worker;
}

static int id_worker(sp_timer_id_t id)
{
    return (int)(id & ((1u << ID_WORKER_BITS) - 1));
}

/* The armed slot named by id, or NO_SLOT. Lock held. */
static uint32_t find(const sp__timer_heap_t *h, sp_timer_id_t id)
{
    uint32_t slot = (uint32_t)(id >> ID_WORKER_BITS) & ((1u << ID_SLOT_BITS) - 1);
    uint32_t gen = (uint32_t)(id >> (ID_WORKER_BITS + ID_SLOT_BITS));
    if (slot >= h->nslots || h->slots[slot].gen != gen ||
        h->slots[slot].heap_pos == NO_SLOT)
        return NO_SLOT;
    return slot;
}

/* ---- heap life cycle ---------------------------------------------------- */

int sp__timer_heap_init(sp__timer_heap_t *h, struct sp_scheduler *s, int worker)
{
    memset(h, 0, sizeof *h);
    h->free_head = NO_SLOT;
    h->sched = s;
    h->worker = worker;
    return -pthread_mutex_init(&h->lock, NULL);
}

void sp__timer_heap_fini(sp__timer_heap_t *h)
{
    for (uint32_t i = 0; i < h->nheap; i++) {
        token_unref(h->slots[h->heap[i]].alive);
        free(h->slots[h->heap[i]].call);
    }
    free(h->slots);
    free(h->heap);
    pthread_mutex_destroy(&h->lock);
}

uint64_t sp__timer_heap_first(sp__timer_heap_t *h)
{
    /* Only the owner adds inline timers; others add under the lock and then
     * kick the owner, so a stale zero here is followed by a wake-up. */
    if (!atomic_load_explicit(&h->armed, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&h->lock);
    uint64_t first = h->nheap ? h->slots[h->heap[0]].deadline : 0;
    pthread_mutex_unlock(&h->lock);
    return first;
}

typedef struct due {
    sp_timer_fn fn;
    void *arg;
    sp_token_t *alive; /* a reference, for conditional timers */
    struct cond_call *call;
    bool inline_cb;
    bool reserved; /* one-shot task: its queue slot is reserved */
    bool release; /* a one-shot timer: drop its scheduler hold */
} due_t;

/* A conditional timer's callback runs as a task that checks the token
 * right before calling. */
typedef struct cond_call {
    sp_timer_fn fn;
    void *arg;
    sp_token_t *alive;
} cond_call_t;

static void run_conditional(void *p)
{
    cond_call_t *c = p;
    if (token_alive(c->alive))
        c->fn(c->arg);
    token_unref(c->alive);
    free(c);
}

/* The callback runs as a task bound to the timer's own worker, as timer.h
 * promises: a recurring timer's callbacks then run one after another on
 * one thread, never on two at once (a stealable task could be taken by an
 * idle worker while the next period's ran here). */
static void dispatch(sp__timer_heap_t *h, due_t *d)
{
    if (d->inline_cb) {
        d->fn(d->arg);
        goto done;
    }
    sp_timer_fn fn = d->fn;
    void *arg = d->arg;
    cond_call_t *c = d->call;
    if (d->alive) {
        if (!c && !(c = sp__malloc(sizeof *c)))
            goto done; /* recurring: this period is skipped */
        *c = (cond_call_t){d->fn, d->arg, d->alive};
        fn = run_conditional;
        arg = c;
    }
    /* We hold the scheduler: it cannot be stopped. */
    int rc = d->reserved
                 ? sp__sched_submit_reserved(h->sched, h->worker, fn, arg,
                                             h->worker)
                 : sp_schedule(h->sched, fn, arg, h->worker);
    if (rc == 0)
        d->alive = NULL; /* the task owns the reference now */
    else if (c)
        free(c); /* recurring: this period is skipped */
done:
    token_unref(d->alive);
    if (d->release)
        sp__sched_release(h->sched);
}

/* Whether the slot's timer holds a queue slot for its task. */
static bool holds_slot(const sp__timer_slot_t *s)
{
    return !s->recurring && !s->inline_cb;
}

/* A one-shot timer's reservations, given back unused. */
static void unreserve(sp__timer_heap_t *h, bool reserved, cond_call_t *c)
{
    if (reserved)
        sp__sched_unreserve(&h->sched->workers[h->worker], true);
    free(c);
}

void sp__timer_heap_expire(sp__timer_heap_t *h)
{
    due_t due[EXPIRE_BATCH];
    size_t n;
    if (!atomic_load_explicit(&h->armed, memory_order_relaxed))
        return;
    do {
        n = 0;
        pthread_mutex_lock(&h->lock);
        uint64_t now = sp_now_ns();
        while (n < EXPIRE_BATCH && h->nheap &&
               h->slots[h->heap[0]].deadline <= now) {
            uint32_t slot = h->heap[0];
            sp__timer_slot_t *s = &h->slots[slot];
            due_t *d = &due[n];
            d->fn = s->fn;
            d->arg = s->arg;
            d->inline_cb = s->inline_cb;
            d->reserved = holds_slot(s);
            d->call = s->call;
            d->alive = s->alive;
            d->release = !s->recurring;
            if (s->recurring && token_alive(s->alive)) {
                token_ref(s->alive);
                /* No drift: step from the old deadline past now. */
                uint64_t skip = (now - s->deadline) / s->period + 1;
                s->deadline += skip * s->period;
                heap_update(h, slot);
            } else {
                if (s->recurring) /* its object died: retire it */
                    d->release = true;
                heap_remove(h, slot);
                slot_free(h, slot);
            }
            if (token_alive(d->alive))
                n++;
            else if (d->release) /* conditional, object gone: never runs */
                d->fn = NULL, n++;
            else
                token_unref(d->alive);
        }
        pthread_mutex_unlock(&h->lock);
        for (size_t i = 0; i < n; i++) {
            if (due[i].fn) {
                dispatch(h, &due[i]);
            } else {
                unreserve(h, due[i].reserved, due[i].call);
                token_unref(due[i].alive);
                sp__sched_release(h->sched);
            }
        }
    } while (n == EXPIRE_BATCH);
}

/* ---- adding, cancelling, retiming (the owner's lock held inside) ---- */

static int add_locked(sp__timer_heap_t *h, uint64_t delay_ns, sp_timer_fn fn,
                      void *arg, bool recurring, bool inline_cb,
                      sp_token_t *alive, cond_call_t *call, sp_timer_id_t *id,
                      bool *first)
{
    uint32_t slot;
    int rc = slot_alloc(h, &slot);
    if (rc < 0)
        return rc;
    sp__timer_slot_t *s = &h->slots[slot];
    s->start = sp_now_ns();
    s->deadline = s->start + delay_ns;
    s->period = delay_ns ? delay_ns : 1;
    s->seq = h->seq++;
    s->fn = fn;
    s->arg = arg;
    s->alive = alive;
    s->call = call;
    token_ref(alive);
    s->recurring = recurring;
    s->inline_cb = inline_cb;
    place(h, h->nheap++, slot);
    atomic_store_explicit(&h->armed, h->nheap, memory_order_relaxed);
    sift_up(h, h->nheap - 1);
    *first = h->heap[0] == slot;
    if (id)
        *id = make_id(h, slot);
    return 0;
}

int sp__timer_add_inline(sp__timer_heap_t *h, uint64_t delay_ns,
                         sp_timer_fn fn, void *arg, sp_timer_id_t *id)
{
    int rc = sp__sched_hold(h->sched);
    if (rc < 0)
        return rc;
    bool first;
    pthread_mutex_lock(&h->lock);
    rc = add_locked(h, delay_ns, fn, arg, false, true, NULL, NULL, id, &first);
    pthread_mutex_unlock(&h->lock);
    if (rc < 0)
        sp__sched_release(h->sched);
    return rc;
}

int sp__timer_heap_add(sp__timer_heap_t *h, uint64_t delay_ns, sp_timer_fn fn,
                       void *arg, bool recurring, sp_token_t *alive,
                       sp_timer_id_t *id, bool *first)
{
    int rc = sp__sched_hold(h->sched);
    if (rc < 0)
        return rc;
    /* A one-shot timer's task: its queue slot and call record now, where
     * -ENOMEM is an answer (see the top of this file). */
    cond_call_t *call = NULL;
    if (!recurring) {
        rc = sp__sched_reserve(&h->sched->workers[h->worker], true);
        if (rc == 0 && alive && !(call = sp__malloc(sizeof *call))) {
            sp__sched_unreserve(&h->sched->workers[h->worker], true);
            rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        pthread_mutex_lock(&h->lock);
        rc = add_locked(h, delay_ns, fn, arg, recurring, false, alive, call,
                        id, first);
        pthread_mutex_unlock(&h->lock);
        if (rc < 0)
            unreserve(h, !recurring, call);
    }
    if (rc < 0)
        sp__sched_release(h->sched);
    return rc;
}

int sp__timer_id_worker(sp_timer_id_t id)
{
    return id_worker(id);
}

int sp__timer_heap_cancel(sp__timer_heap_t *h, sp_timer_id_t id)
{
    pthread_mutex_lock(&h->lock);
    uint32_t slot = find(h, id);
    sp_token_t *alive = NULL;
    cond_call_t *call = NULL;
    bool reserved = false;
    if (slot != NO_SLOT) {
        sp__timer_slot_t *s = &h->slots[slot];
        alive = s->alive;
        call = s->call;
        reserved = holds_slot(s);
        heap_remove(h, slot);
        slot_free(h, slot);
    }
    pthread_mutex_unlock(&h->lock);
    if (slot == NO_SLOT)
        return -ENOENT;
    unreserve(h, reserved, call);
    token_unref(alive);
    sp__sched_release(h->sched);
    return 0;
}

int sp__timer_heap_retime(sp__timer_heap_t *h, sp_timer_id_t id, bool set_period,
                          uint64_t period_ns, bool from_now, bool *first)
{
    pthread_mutex_lock(&h->lock);
    uint32_t slot = find(h, id);
    *first = false;
    if (slot != NO_SLOT) {
        sp__timer_slot_t *s = &h->slots[slot];
        if (set_period)
            s->period = period_ns ? period_ns : 1;
        uint64_t now = sp_now_ns();
        if (from_now)
            s->start = now;
        s->deadline = s->start + (set_period ? period_ns : s->period);
        heap_update(h, slot);
        *first = h->heap[0] == slot;
    }
    pthread_mutex_unlock(&h->lock);
    return slot == NO_SLOT ? -ENOENT : 0;
}
