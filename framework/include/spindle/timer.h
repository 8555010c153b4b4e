/* spindle timers, on the monotonic clock, owned by an IOManager.
 *
 * A timer runs on one worker (the one that added it, or a round-robin pick
 * when added from outside) and its callback runs there as a task bound to
 * that worker: a recurring timer's callbacks run one after another on one
 * thread (two overlap only if a callback parks past the next period). Timer
 * handles are ids checked against a generation, so using the id of a timer
 * that already fired or was cancelled is safe and returns -ENOENT.
 *
 * Recurring timers do not drift: each deadline is the previous deadline plus
 * the period (periods missed while the worker was busy are skipped, not
 * replayed). All calls are safe from any thread, including from the timer's
 * own callback and while it fires; a cancel that wins the race with a firing
 * one-shot timer returns -ENOENT.
 */
#ifndef SPINDLE_TIMER_H
#define SPINDLE_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "spindle/iomanager.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t sp_timer_id_t; /* 0 is never a valid id */
typedef void (*sp_timer_fn)(void *arg);

/* A liveness token for conditional timers: create it with the object it
 * stands for and kill it when the object dies. A conditional timer keeps a
 * reference and fires only while the token is alive; the token's memory
 * lives until its last holder lets go, so the check is never a use after
 * free. */
typedef struct sp_token sp_token_t;
sp_token_t *sp_token_create(void); /* NULL + errno */
/* The object is gone: no conditional timer holding the token fires after
 * this returns (one already running is not interrupted). Drops the
 * creator's reference. */
void sp_token_kill(sp_token_t *t);

typedef enum sp_timer_flag { SP_TIMER_RECURRING = 1 } sp_timer_flag_t;

/* Add a timer firing fn(arg) after delay_us microseconds (then every
 * delay_us with SP_TIMER_RECURRING). With a non-NULL `alive`, fire only
 * while that token is alive. On success stores the id in *id and returns 0;
 * -EINVAL, -ENOMEM, -ESHUTDOWN. io may be NULL inside an IOManager worker.
 * What a one-shot timer needs to fire is reserved here (-ENOMEM now, never
 * a lost callback later); a recurring timer whose period finds no memory
 * for its task skips that period and tries again at the next. */
int sp_timer_add(sp_iomanager_t *io, uint64_t delay_us, sp_timer_fn fn,
                 void *arg, unsigned flags, sp_token_t *alive,
                 sp_timer_id_t *id);
/* 0, or -ENOENT if the timer already fired (one-shot) or was cancelled. */
int sp_timer_cancel(sp_iomanager_t *io, sp_timer_id_t id);
/* Restart the current period from now. 0 or -ENOENT. */
int sp_timer_refresh(sp_iomanager_t *io, sp_timer_id_t id);
/* New period; counted from now, or from the timer's original start. */
int sp_timer_reset(sp_iomanager_t *io, sp_timer_id_t id, uint64_t delay_us,
                   bool from_now);

/* Fiber sleep on the calling worker's timers. -EPERM outside an IOManager
 * fiber. */
int sp_sleep_us(uint64_t usec);

/* Monotonic clock in nanoseconds. */
uint64_t sp_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
