/* spindle sync: fiber-aware mutex, read-write lock, condition variable,
 * semaphore, wait group and channels.
 *
 * Who may call what
 *   - In a task fiber (a fiber run by a scheduler): a blocking call parks
 *     the fiber; its worker keeps running other fibers. Objects may be
 *     shared by fibers on every worker and by plain threads.
 *   - In a plain thread (not a scheduler worker, e.g. main() or a thread of
 *     your own): a blocking call blocks the thread on a pthread condition
 *     variable, with the same semantics. A fiber that a plain thread runs
 *     by hand with sp_fiber_resume() counts as that thread.
 *   - On a worker thread outside a task fiber (a timer callback, a
 *     scheduler hook): a call that would block returns -EPERM, since
 *     blocking there would stall every fiber of the worker. Calls that never
 *     block (try variants, unlock, post, signal, send to a channel with
 *     room, close) work everywhere.
 *
 * Timeouts
 *   Every blocking call takes timeout_us: < 0 waits forever, 0 never waits
 *   (the call fails at once with -ETIMEDOUT when it would have to), > 0
 *   waits at most that many microseconds on the monotonic clock and never
 *   returns -ETIMEDOUT earlier. In a fiber a bounded wait uses its worker's
 *   IOManager timers, so a fiber of a plain scheduler (no IOManager) gets
 *   -ENOTSUP for timeout_us > 0 (forever and 0 work). Plain threads use
 *   pthread_cond_timedwait and support every timeout.
 *
 * Interrupts
 *   In a task fiber every blocking call here (and sp_fiber_join) ends early
 *   with -err when sp_fiber_interrupt(f, err) interrupts it (task.h); a
 *   lock call then returns without the lock. sp_cond_wait still re-locks
 *   its mutex before returning, uninterrupted.
 *
 * Errors: 0 or a negative errno; constructors return NULL and set errno.
 * Waiters queue in FIFO order. Objects are created and destroyed by the
 * caller; destroying one that is held or has waiters is undefined.
 */
#ifndef SPINDLE_SYNC_H
#define SPINDLE_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SP_FOREVER ((int64_t)-1)

/* ---- mutex ---------------------------------------------------------------
 * Not recursive; owned by the fiber (or plain thread) that locked it.
 * Barging with a starvation guard: unlock releases the mutex and wakes the
 * oldest waiter, which competes with fibers that arrive meanwhile (a fiber
 * that locks and unlocks in a loop keeps going instead of switching on every
 * iteration). A waiter that has waited longer than SP_MUTEX_STARVE_US is
 * handed the mutex directly on the next unlock, so no waiter starves. */
#define SP_MUTEX_STARVE_US 1000

typedef struct sp_mutex sp_mutex_t;

sp_mutex_t *sp_mutex_create(void); /* NULL + errno (ENOMEM) */
void sp_mutex_destroy(sp_mutex_t *m); /* NULL is a no-op */
/* 0, -EDEADLK if the caller already holds it, -EPERM (see top). */
int sp_mutex_lock(sp_mutex_t *m);
/* 0, -ETIMEDOUT, -EDEADLK, -EPERM, -ENOTSUP (see top). */
int sp_mutex_timedlock(sp_mutex_t *m, int64_t timeout_us);
/* 0 or -EBUSY; never blocks. */
int sp_mutex_trylock(sp_mutex_t *m);
/* 0, or -EPERM if the caller does not hold it. */
int sp_mutex_unlock(sp_mutex_t *m);

/* ---- read-write lock -----------------------------------------------------
 * Many readers or one writer, granted in arrival order: a waiting writer
 * holds back readers that come after it (no writer starvation), and the
 * readers queued together behind a writer are let in together. So a reader
 * must not take the lock again while it holds it (a writer between the two
 * would deadlock them). */
typedef struct sp_rwlock sp_rwlock_t;

sp_rwlock_t *sp_rwlock_create(void);
void sp_rwlock_destroy(sp_rwlock_t *rw);
/* 0, -ETIMEDOUT, -EDEADLK (writer re-locking), -EPERM, -ENOTSUP. */
int sp_rwlock_rdlock(sp_rwlock_t *rw, int64_t timeout_us);
int sp_rwlock_wrlock(sp_rwlock_t *rw, int64_t timeout_us);
int sp_rwlock_tryrdlock(sp_rwlock_t *rw); /* 0 or -EBUSY */
int sp_rwlock_trywrlock(sp_rwlock_t *rw); /* 0 or -EBUSY */
/* Releases the caller's hold, read or write. -EPERM when the lock is write
 * held by someone else or not held at all. */
int sp_rwlock_unlock(sp_rwlock_t *rw);

/* ---- condition variable --------------------------------------------------
 * Used with an sp_mutex_t the caller holds. Wake-ups are not spurious by
 * design, but callers should still loop on their predicate: another fiber
 * may change it between the signal and the re-lock. */
typedef struct sp_cond sp_cond_t;

sp_cond_t *sp_cond_create(void);
void sp_cond_destroy(sp_cond_t *c);
/* Atomically release m and wait for a signal; m is locked again before
 * returning, whatever the result (the re-lock itself is not bounded by the
 * timeout, as with pthread_cond_timedwait). 0, -ETIMEDOUT, -EPERM (m not
 * held by the caller, or see top; m is then untouched), -ENOTSUP. */
int sp_cond_wait(sp_cond_t *c, sp_mutex_t *m, int64_t timeout_us);
/* Wake the oldest waiter / every waiter. Always 0. */
int sp_cond_signal(sp_cond_t *c);
int sp_cond_broadcast(sp_cond_t *c);

/* ---- counting semaphore -------------------------------------------------
 * post() hands its permit straight to the oldest waiter, so a waiter is
 * never overtaken by a later wait(). */
typedef struct sp_sem sp_sem_t;

#define SP_SEM_MAX 0x7fffffffu

sp_sem_t *sp_sem_create(unsigned initial); /* EINVAL if > SP_SEM_MAX */
void sp_sem_destroy(sp_sem_t *s);
/* Take one permit. 0, -ETIMEDOUT, -EPERM, -ENOTSUP. */
int sp_sem_wait(sp_sem_t *s, int64_t timeout_us);
int sp_sem_trywait(sp_sem_t *s); /* 0 or -EAGAIN */
/* Add one permit. 0, -EOVERFLOW at SP_SEM_MAX. */
int sp_sem_post(sp_sem_t *s);
/* Permits available now (0 while fibers wait). */
unsigned sp_sem_value(sp_sem_t *s);

/* ---- wait group ----------------------------------------------------------
 * A counter of outstanding work; wait() returns when it is zero. */
typedef struct sp_wg sp_wg_t;

sp_wg_t *sp_wg_create(void);
void sp_wg_destroy(sp_wg_t *wg);
/* Add delta (may be negative). -EINVAL if the counter would go below 0 or
 * past INT_MAX (it is then unchanged). Reaching 0 releases every waiter. */
int sp_wg_add(sp_wg_t *wg, int delta);
int sp_wg_done(sp_wg_t *wg); /* sp_wg_add(wg, -1) */
/* 0 once the counter is 0 (at once if it is), -ETIMEDOUT, -EPERM,
 * -ENOTSUP. */
int sp_wg_wait(sp_wg_t *wg, int64_t timeout_us);
int sp_wg_count(sp_wg_t *wg);

/* ---- channels ------------------------------------------------------------
 * A FIFO of fixed-size items, copied in and out (send a pointer to share
 * an object). capacity 0 is an unbuffered (rendezvous) channel: a send
 * completes when a receiver takes the item. SP_CHAN_UNBOUNDED never blocks
 * senders (the buffer grows; -ENOMEM when it cannot).
 *
 * Order: items come out in the order their sends completed, so the items
 * of one sender arrive in the order it sent them. Blocked senders and
 * receivers are served FIFO.
 *
 * Close: sends fail with -EPIPE from then on (including sends blocked at
 * the time, whose items are not delivered); receivers still get every
 * buffered item, then -EPIPE. */
typedef struct sp_chan sp_chan_t;

#define SP_CHAN_UNBOUNDED SIZE_MAX

/* elem_size may be 0 (pure signals; item pointers may then be NULL).
 * NULL + errno: EINVAL (elem_size * capacity overflows), ENOMEM. */
sp_chan_t *sp_chan_create(size_t elem_size, size_t capacity);
void sp_chan_destroy(sp_chan_t *ch);
/* Copy elem_size bytes from item into the channel. 0, -EPIPE (closed),
 * -ETIMEDOUT, -ENOMEM (unbounded), -EPERM, -ENOTSUP. */
int sp_chan_send(sp_chan_t *ch, const void *item, int64_t timeout_us);
/* Copy the oldest item into out. 0, -EPIPE (closed and drained),
 * -ETIMEDOUT, -EPERM, -ENOTSUP. */
int sp_chan_recv(sp_chan_t *ch, void *out, int64_t timeout_us);
/* Never block: -EAGAIN instead of waiting. */
int sp_chan_trysend(sp_chan_t *ch, const void *item);
int sp_chan_tryrecv(sp_chan_t *ch, void *out);
/* 0, or -EALREADY if already closed. Wakes every blocked sender (-EPIPE)
 * and, the buffer being empty then, every blocked receiver (-EPIPE). */
int sp_chan_close(sp_chan_t *ch);
/* Items buffered now. */
size_t sp_chan_len(sp_chan_t *ch);
bool sp_chan_closed(sp_chan_t *ch);

/* One case of sp_chan_select. */
typedef enum sp_chan_dir { SP_CHAN_RECV = 0, SP_CHAN_SEND = 1 } sp_chan_dir_t;
typedef struct sp_chan_op {
    sp_chan_t *chan; /* NULL: a case that never fires */
    int op;          /* SP_CHAN_RECV or SP_CHAN_SEND */
    void *buf;       /* recv: where the item goes; send: the item */
    int result;      /* out, for the chosen case: 0 or -EPIPE (closed) */
} sp_chan_op_t;

#define SP_CHAN_SELECT_MAX 64

/* Wait until one of the cases can complete, complete exactly that one and
 * return its index; ops[index].result says how (a closed channel is ready:
 * recv from it when drained, or send to it, completes with -EPIPE). When
 * several are ready the choice is random, so no channel starves. Otherwise
 * -ETIMEDOUT (also with timeout_us 0 when nothing is ready), -EINVAL (n out
 * of 1..SP_CHAN_SELECT_MAX, a bad op, or no channel at all with an infinite
 * timeout), -EPERM, -ENOTSUP. */
int sp_chan_select(sp_chan_op_t *ops, int n, int64_t timeout_us);

/* ---- join ----------------------------------------------------------------
 * Wait until fiber f (a handle: task.h) has finished; *result (if not NULL)
 * gets its result code (sp_go's function's return value; 0 for other
 * tasks). From a task fiber or a plain thread. 0, -ETIMEDOUT, -EDEADLK (f
 * is the caller), -EINVAL, -EPERM, -ENOTSUP (see top). */
struct sp_fiber;
int sp_fiber_join(struct sp_fiber *f, int64_t timeout_us, int *result);

#ifdef __cplusplus
}
#endif
#endif
