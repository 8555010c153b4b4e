/* How an idle worker's poll ends at its earliest timer.
 *
 * libev's epoll backend waits in whole milliseconds, rounded up: alone, it
 * would end a 50 µs sleep after a millisecond or more. So a deadline closer
 * than NEAR_NS is waited for with a timerfd (CLOCK_MONOTONIC, the clock of
 * the timers, armed to the absolute deadline) that the loop watches as an
 * ev_io: the kernel fires it on time and applies no timer slack to it. A
 * farther deadline keeps libev's millisecond timeout, aimed NEAR_NS early
 * (the wake-up then finds it near). The timerfd thus costs a syscall only
 * when a worker blocks with a deadline that close and not already armed;
 * the far deadlines of a busy server (per-request timeouts, cancelled long
 * before they are due) cost none.
 */
#include <errno.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "iomanager_internal.h"

/* More than libev's rounding (1 ms) plus the default timer slack (50 µs)
 * of the far path's epoll_wait, so that its wake-up always comes before
 * the deadline. */
#define NEAR_NS 2000000u

static void on_wake_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)t;
    (void)revents; /* only ends ev_run; timers are expired after it */
}

static void on_tfd(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)revents;
    iom_worker_t *x = ev_userdata(loop);
    uint64_t ticks;
    /* Read, or level-triggered epoll reports it again on every poll. */
    long r = syscall(SYS_read, io->fd, &ticks, sizeof ticks);
    (void)r; /* EAGAIN: re-armed since it fired, nothing to clear */
    x->tfd_at = 0;
}

int sp__wake_open(iom_worker_t *x)
{
    x->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (x->tfd < 0)
        return -errno;
    x->tfd_at = 0;
    ev_init(&x->wake_timer, on_wake_timer);
    ev_io_init(&x->tfd_io, on_tfd, x->tfd, EV_READ);
    ev_io_start(x->loop, &x->tfd_io);
    return 0;
}

void sp__wake_close(iom_worker_t *x)
{
    if (x->tfd >= 0)
        close(x->tfd);
    x->tfd = -1;
}

/* End the poll with libev's timeout, in at least `ns` (it rounds up to
 * whole milliseconds). */
static void ms_wake(iom_worker_t *x, uint64_t ns)
{
    ev_now_update(x->loop);
    ev_timer_set(&x->wake_timer, (double)ns / 1e9, 0.);
    ev_timer_start(x->loop, &x->wake_timer);
}

void sp__wake_before(iom_worker_t *x, uint64_t first)
{
    if (!first)
        return;
    uint64_t now = sp__now_ns();
    if (first > now + NEAR_NS) {
        ms_wake(x, first - now - NEAR_NS);
        return;
    }
    /* Armed to another deadline (a later one, or an earlier one whose timer
     * was cancelled): one settime now saves a late or an idle wake-up. */
    if (x->tfd_at == first)
        return;
    struct itimerspec at = {
        .it_value = {(time_t)(first / 1000000000u), (long)(first % 1000000000u)}};
    if (syscall(SYS_timerfd_settime, x->tfd, TFD_TIMER_ABSTIME, &at, NULL) == 0)
        x->tfd_at = first;
    else
        ms_wake(x, first > now ? first - now : 0); /* late, never lost */
}

void sp__wake_after(iom_worker_t *x)
{
    ev_timer_stop(x->loop, &x->wake_timer);
}
