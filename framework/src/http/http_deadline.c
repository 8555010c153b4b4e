/* Read deadlines of a server connection without a timer-heap operation per
 * read (the heap costs a sift on every insert and cancel, and keep-alive
 * traffic would pay both on every request).
 *
 * One timer per connection, armed no later than the deadline of the read
 * in progress. A deadline that moves later (the next request's) leaves the
 * timer alone: when it fires early it re-arms for the rest. Only a deadline
 * earlier than the armed timer re-arms it. When the timer finds the read's
 * deadline passed, it cancels the read's wait (sp_io_cancel), which the
 * connection reports as a timeout.
 *
 * The timer runs inline on the worker that armed it, so it never outlives
 * the connection on that thread: free() cancels it. The state is shared
 * through atomics and a reference count all the same, so a connection
 * whose fiber the monitor moved to another worker stays safe. */
#include <stdlib.h>

#include "http_internal.h"
#include "io/iomanager_internal.h"
#include "spindle/timer.h"

struct sp__http_deadline {
    _Atomic uint64_t at;       /* the pending read's deadline (ns), 0: none */
    _Atomic uint64_t armed_at; /* when the armed timer fires, 0: none */
    _Atomic sp_timer_id_t timer;
    _Atomic bool expired; /* the timer cancelled the pending read */
    _Atomic bool closed;  /* the connection is gone */
    _Atomic int refs;     /* the connection's, and one per armed timer */
    sp_iomanager_t *io;
    int fd;
};

static void unref(sp__http_deadline_t *d)
{
    if (atomic_fetch_sub(&d->refs, 1) == 1)
        free(d);
}

static void on_timer(void *p);

/* On a worker of d->io: a timer on this worker's heap, firing at `at`. */
static void arm(sp__http_deadline_t *d, uint64_t at, uint64_t now)
{
    sp__worker_t *self = sp__sched_self(&d->io->s);
    if (!self)
        return;
    sp__timer_heap_t *h = sp__iom_timer_heap(d->io, self->index);
    atomic_fetch_add(&d->refs, 1);
    sp_timer_id_t id;
    if (sp__timer_add_inline(h, at > now ? at - now : 0, on_timer, d, &id) < 0) {
        unref(d); /* out of memory or stopping: this read waits unbounded */
        return;
    }
    atomic_store(&d->armed_at, at);
    atomic_store(&d->timer, id);
}

static void on_timer(void *p)
{
    sp__http_deadline_t *d = p;
    atomic_store(&d->timer, 0);
    atomic_store(&d->armed_at, 0);
    uint64_t at = atomic_load(&d->at);
    if (at && !atomic_load(&d->closed)) {
        uint64_t now = sp__now_ns();
        if (now >= at) {
            atomic_store(&d->expired, true);
            sp_io_cancel(d->fd, SP_IO_READ);
        } else {
            arm(d, at, now); /* fired early: the deadline moved on */
        }
    }
    unref(d);
}

sp__http_deadline_t *sp__http_deadline_new(int fd)
{
    sp_iomanager_t *io = sp_iomanager_current();
    if (!io)
        return NULL;
    sp__http_deadline_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    atomic_init(&d->refs, 1);
    d->io = io;
    d->fd = fd;
    return d;
}

static void disarm(sp__http_deadline_t *d)
{
    sp_timer_id_t old = atomic_exchange(&d->timer, 0);
    if (old && sp_timer_cancel(d->io, old) == 0)
        unref(d); /* else it fired: its callback drops its reference */
}

void sp__http_deadline_set(sp__http_deadline_t *d, uint64_t at_ns)
{
    atomic_store(&d->expired, false);
    atomic_store(&d->at, at_ns);
    if (!at_ns)
        return;
    uint64_t armed = atomic_load(&d->armed_at);
    if (armed && armed <= at_ns)
        return; /* fires in time, then re-arms for the rest */
    disarm(d);
    arm(d, at_ns, sp__now_ns());
}

void sp__http_deadline_clear(sp__http_deadline_t *d)
{
    /* A plain store: d is usually a cold line by the time a read ends, and
     * a locked store (or a load) would wait for it. Nothing needs the
     * order: a timer that still sees the old deadline at most cancels a
     * wait that is no longer there. */
    atomic_store_explicit(&d->at, 0, memory_order_release);
}

bool sp__http_deadline_expired(const sp__http_deadline_t *d)
{
    /* The timer set it before the cancel that ended the read. */
    return atomic_load(&d->expired);
}

void sp__http_deadline_free(sp__http_deadline_t *d)
{
    if (!d)
        return;
    atomic_store(&d->closed, true);
    atomic_store(&d->at, 0);
    disarm(d);
    unref(d);
}
