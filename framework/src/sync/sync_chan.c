/* Channels: a ring buffer of items plus queues of blocked senders and
 * receivers, all under `lk`.
 *
 * Invariants: receivers wait only while the buffer is empty, senders only
 * while it is full (always, for capacity 0), so a send first serves a
 * waiting receiver directly (copying into its buffer) and a receive refills
 * the slot it freed from the oldest blocked sender; items thus leave in
 * the order their sends completed.
 *
 * select locks every channel it uses, in address order, for its look at
 * the cases and for queueing on them, so nothing can claim its wait while
 * it is still deciding; single sends and receives hold one channel lock at
 * a time, so the order rules out deadlock. Whichever peer then claims the
 * wait through one of its nodes completes that case; the other nodes are
 * stale from that moment and dropped. */
#include "sync_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "spindle/sync.h"

enum { UNBOUNDED_FIRST = 16 };

struct sp_chan {
    sp__spin_t lk;
    size_t esize, cap;  /* cap: SP_CHAN_UNBOUNDED, or the bound */
    unsigned char *buf; /* ring of nslots items */
    size_t nslots, head, count;
    bool closed;
    sp__wq_t sendq, recvq;
};
_Static_assert(offsetof(struct sp_chan, lk) == 0, "sp__sync_new");

sp_chan_t *sp_chan_create(size_t elem_size, size_t capacity)
{
    size_t nslots = capacity == SP_CHAN_UNBOUNDED ? UNBOUNDED_FIRST : capacity;
    if (elem_size && nslots > SIZE_MAX / elem_size) {
        errno = EINVAL;
        return NULL;
    }
    sp_chan_t *ch = sp__sync_new(sizeof *ch);
    if (!ch)
        return NULL;
    if (elem_size && nslots) {
        ch->buf = malloc(nslots * elem_size);
        if (!ch->buf) {
            sp__sync_free(ch);
            errno = ENOMEM;
            return NULL;
        }
    }
    ch->esize = elem_size;
    ch->cap = capacity;
    ch->nslots = nslots;
    return ch;
}

void sp_chan_destroy(sp_chan_t *ch)
{
    if (!ch)
        return;
    free(ch->buf);
    sp__sync_free(ch);
}

/* ---- the ring (lk held) ------------------------------------------------ */

static void copy(const sp_chan_t *ch, void *to, const void *from)
{
    if (ch->esize)
        memcpy(to, from, ch->esize);
}

static unsigned char *slot(const sp_chan_t *ch, size_t i)
{
    return ch->buf + ((ch->head + i) % ch->nslots) * ch->esize;
}

/* Double an unbounded channel's ring, unrolled to start at 0. */
static int grow(sp_chan_t *ch)
{
    size_t n = ch->nslots * 2;
    if (ch->esize && n > SIZE_MAX / ch->esize)
        return -ENOMEM;
    unsigned char *b = NULL;
    if (ch->esize) {
        b = malloc(n * ch->esize);
        if (!b)
            return -ENOMEM;
        for (size_t i = 0; i < ch->count; i++)
            memcpy(b + i * ch->esize, slot(ch, i), ch->esize);
    }
    free(ch->buf);
    ch->buf = b;
    ch->nslots = n;
    ch->head = 0;
    return 0;
}

static int push(sp_chan_t *ch, const void *item)
{
    if (ch->count == ch->nslots) {
        int rc = grow(ch);
        if (rc < 0)
            return rc;
    }
    if (ch->esize)
        copy(ch, slot(ch, ch->count), item);
    ch->count++;
    return 0;
}

static void pop(sp_chan_t *ch, void *out)
{
    if (ch->esize)
        copy(ch, out, slot(ch, 0));
    ch->head = ch->nslots ? (ch->head + 1) % ch->nslots : 0;
    ch->count--;
}

/* ---- one operation, lk held --------------------------------------------
 * Each returns true when the operation completed now (result in *res),
 * false when it would have to wait. Waits they claimed go on d. */

static bool try_send(sp_chan_t *ch, const void *item, int *res, sp__dlist_t *d)
{
    if (ch->closed) {
        *res = -EPIPE;
        return true;
    }
    sp__wnode_t *r = sp__wq_claim_first(&ch->recvq, 0);
    if (r) {
        copy(ch, r->buf, item);
        sp__dlist_add(d, r->wait);
        *res = 0;
        return true;
    }
    if (ch->count < ch->cap) {
        *res = push(ch, item);
        return true;
    }
    return false;
}

static bool try_recv(sp_chan_t *ch, void *out, int *res, sp__dlist_t *d)
{
    if (ch->count) {
        pop(ch, out);
        sp__wnode_t *s = sp__wq_claim_first(&ch->sendq, 0);
        if (s) { /* its item takes the slot just freed */
            push(ch, s->buf);
            sp__dlist_add(d, s->wait);
        }
        *res = 0;
        return true;
    }
    sp__wnode_t *s = sp__wq_claim_first(&ch->sendq, 0);
    if (s) { /* unbuffered: straight from the sender */
        copy(ch, out, s->buf);
        sp__dlist_add(d, s->wait);
        *res = 0;
        return true;
    }
    if (ch->closed) {
        *res = -EPIPE;
        return true;
    }
    return false;
}

static sp__wq_t *queue_of(sp_chan_t *ch, int op)
{
    return op == SP_CHAN_SEND ? &ch->sendq : &ch->recvq;
}

/* ---- send and receive -------------------------------------------------- */

static int transfer(sp_chan_t *ch, int op, void *buf, int64_t timeout_us)
{
    sp__dlist_t d = {NULL};
    int res;
    sp__spin_lock(&ch->lk);
    bool done = op == SP_CHAN_SEND ? try_send(ch, buf, &res, &d)
                                   : try_recv(ch, buf, &res, &d);
    if (done) {
        sp__spin_unlock(&ch->lk);
        sp__dlist_deliver(&d);
        return res;
    }
    if (timeout_us == 0) {
        sp__spin_unlock(&ch->lk);
        return -ETIMEDOUT;
    }
    sp__wait_t w;
    sp__wnode_t n = {.wait = &w, .kind = op, .buf = buf};
    int rc = sp__wait_begin(&w, timeout_us, SP__WAIT_CHAN);
    if (rc < 0) {
        sp__spin_unlock(&ch->lk);
        return rc;
    }
    sp__wq_push(queue_of(ch, op), &n);
    sp__spin_unlock(&ch->lk);
    rc = sp__wait_block(&w);
    sp__wnode_withdraw(&ch->lk, queue_of(ch, op), &w, &n);
    sp__wait_end(&w);
    return rc;
}

int sp_chan_send(sp_chan_t *ch, const void *item, int64_t timeout_us)
{
    /* The item is only read, through the node's generic pointer. */
    return transfer(ch, SP_CHAN_SEND, (void *)(uintptr_t)item, timeout_us);
}

int sp_chan_recv(sp_chan_t *ch, void *out, int64_t timeout_us)
{
    return transfer(ch, SP_CHAN_RECV, out, timeout_us);
}

int sp_chan_trysend(sp_chan_t *ch, const void *item)
{
    int rc = sp_chan_send(ch, item, 0);
    return rc == -ETIMEDOUT ? -EAGAIN : rc;
}

int sp_chan_tryrecv(sp_chan_t *ch, void *out)
{
    int rc = sp_chan_recv(ch, out, 0);
    return rc == -ETIMEDOUT ? -EAGAIN : rc;
}

int sp_chan_close(sp_chan_t *ch)
{
    sp__dlist_t d = {NULL};
    sp__spin_lock(&ch->lk);
    if (ch->closed) {
        sp__spin_unlock(&ch->lk);
        return -EALREADY;
    }
    ch->closed = true;
    sp__wnode_t *n;
    while ((n = sp__wq_claim_first(&ch->sendq, -EPIPE)))
        sp__dlist_add(&d, n->wait);
    /* Receivers wait only on an empty buffer: nothing left for them. */
    while ((n = sp__wq_claim_first(&ch->recvq, -EPIPE)))
        sp__dlist_add(&d, n->wait);
    sp__spin_unlock(&ch->lk);
    sp__dlist_deliver(&d);
    return 0;
}

size_t sp_chan_len(sp_chan_t *ch)
{
    sp__spin_lock(&ch->lk);
    size_t n = ch->count;
    sp__spin_unlock(&ch->lk);
    return n;
}

bool sp_chan_closed(sp_chan_t *ch)
{
    sp__spin_lock(&ch->lk);
    bool c = ch->closed;
    sp__spin_unlock(&ch->lk);
    return c;
}

/* ---- select ------------------------------------------------------------ */

/* Per-thread xorshift64*: a random first case, without a shared counter
 * bouncing between workers. Fibers never change threads mid-call. */
static _Thread_local uint64_t rng;

static unsigned pick(unsigned n)
{
    if (!rng)
        rng = (sp_now_ns() ^ (uintptr_t)&rng) | 1;
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (unsigned)((rng * 0x2545F4914F6CDD1Dull) >> 32) % n;
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(sp_chan_t *const *)a;
    uintptr_t y = (uintptr_t)*(sp_chan_t *const *)b;
    return x < y ? -1 : x > y;
}

static void unlock_all(sp_chan_t **chans, int n)
{
    for (int i = 0; i < n; i++)
        sp__spin_unlock(&chans[i]->lk);
}

int sp_chan_select(sp_chan_op_t *ops, int n, int64_t timeout_us)
{
    if (!ops || n < 1 || n > SP_CHAN_SELECT_MAX)
        return -EINVAL;
    sp_chan_t *chans[SP_CHAN_SELECT_MAX];
    int nch = 0;
    for (int i = 0; i < n; i++) {
        if (!ops[i].chan)
            continue;
        if (ops[i].op != SP_CHAN_SEND && ops[i].op != SP_CHAN_RECV)
            return -EINVAL;
        chans[nch++] = ops[i].chan;
    }
    if (!nch && timeout_us < 0)
        return -EINVAL; /* nothing could ever end the wait */
    qsort(chans, (size_t)nch, sizeof chans[0], by_address);
    int nlock = 0;
    for (int i = 0; i < nch; i++) /* each channel once */
        if (!nlock || chans[nlock - 1] != chans[i])
            chans[nlock++] = chans[i];
    for (int i = 0; i < nlock; i++)
        sp__spin_lock(&chans[i]->lk);

    sp__dlist_t d = {NULL};
    unsigned start = pick((unsigned)n);
    for (int k = 0; k < n; k++) {
        int i = (int)((start + (unsigned)k) % (unsigned)n);
        sp_chan_op_t *op = &ops[i];
        int res;
        if (op->chan && (op->op == SP_CHAN_SEND
                             ? try_send(op->chan, op->buf, &res, &d)
                             : try_recv(op->chan, op->buf, &res, &d))) {
            unlock_all(chans, nlock);
            sp__dlist_deliver(&d);
            op->result = res;
            return i;
        }
    }
    if (timeout_us == 0) {
        unlock_all(chans, nlock);
        return -ETIMEDOUT;
    }
    sp__wait_t w;
    int rc = sp__wait_begin(&w, timeout_us, SP__WAIT_CHAN);
    if (rc < 0) {
        unlock_all(chans, nlock);
        return rc;
    }
    sp__wnode_t nodes[SP_CHAN_SELECT_MAX];
    for (int i = 0; i < n; i++) {
        nodes[i] = (sp__wnode_t){.wait = &w, .kind = ops[i].op, .index = i,
                                 .buf = ops[i].buf};
        if (ops[i].chan)
            sp__wq_push(queue_of(ops[i].chan, ops[i].op), &nodes[i]);
    }
    unlock_all(chans, nlock);
    rc = sp__wait_block(&w);
    for (int i = 0; i < n; i++)
        if (ops[i].chan)
            sp__wnode_withdraw(&ops[i].chan->lk,
                               queue_of(ops[i].chan, ops[i].op), &w, &nodes[i]);
    sp__wnode_t *won = w.winner;
    sp__wait_end(&w);
    if (!won)
        return rc; /* -ETIMEDOUT, or the timer could not be armed */
    ops[won->index].result = rc;
    return won->index;
}
