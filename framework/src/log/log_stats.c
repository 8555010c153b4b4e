/* What logging lost: messages the queue dropped, lines failed writes lost,
 * and the failures themselves (sp_log_stats). Counted by the writer and
 * the appenders, reported by the loggers; depends on none of them. */
#include <stdatomic.h>

#include "log_internal.h"

static _Atomic uint64_t dropped;
static _Atomic uint64_t lost, write_errors; /* failed writes and their lines */
static _Atomic int last_error;
static uint64_t reported; /* writer state */

void sp__log_drop(void)
{
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

uint64_t sp_log_dropped(void)
{
    return atomic_load_explicit(&dropped, memory_order_relaxed);
}

void sp__log_write_failed(uint64_t lines, int err)
{
    atomic_fetch_add_explicit(&lost, lines, memory_order_relaxed);
    atomic_fetch_add_explicit(&write_errors, 1, memory_order_relaxed);
    atomic_store_explicit(&last_error, err, memory_order_relaxed);
}

int sp_log_stats(sp_log_stats_t *out)
{
    out->dropped = atomic_load_explicit(&dropped, memory_order_relaxed);
    out->lost = atomic_load_explicit(&lost, memory_order_relaxed);
    out->write_errors = atomic_load_explicit(&write_errors, memory_order_relaxed);
    out->last_error = atomic_load_explicit(&last_error, memory_order_relaxed);
    return 0;
}

uint64_t sp__log_take_unreported(void)
{
    uint64_t d = atomic_load_explicit(&dropped, memory_order_relaxed);
    uint64_t n = d - reported;
    reported = d;
    return n;
}
