/* IOManager: a scheduler whose idle workers block in their own libev loop
 * (fd events live in io_event.c, timers in timer.c, how a poll ends at
 * the earliest timer in timer_wake.c).
 *
 * Kicks use the same fence protocol as the scheduler's tickle: leave work,
 * fence, then write the pipe only if the worker is idle; an idle worker
 * sets its flag, fences, then drains its inbox and reads its timers before
 * blocking.
 *
 * Growth (monitor.c): every slot up to the monitor's maximum exists from
 * sp_scheduler_set_monitor on (iom_resize); an extra worker's loop is
 * created when it first starts and kept when it retires (iom_may_leave
 * says when it may), so nothing indexing the slots ever meets freed state.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hook_bridge.h"
#include "iomanager_internal.h"


sp_iomanager_t *sp_iomanager_current(void)
{
    return sp__iom_of(sp_scheduler_current());
}

sp_scheduler_t *sp_iomanager_scheduler(sp_iomanager_t *io)
{
    return &io->s;
}

int sp_iomanager_stats(const sp_iomanager_t *io, int worker, sp_io_stats_t *out)
{
    if (!io || !out || worker < 0 || worker >= io->nw)
        return -EINVAL;
    const iom_worker_t *x = io->w[worker];
    out->fd_waits = atomic_load_explicit(&x->waiting, memory_order_relaxed);
    out->timers = atomic_load_explicit(&x->timers.armed, memory_order_relaxed);
    return 0;
}

static void tickle(sp_scheduler_t *s, int worker)
{
    sp__iom_tickle(sp__iom_of(s), worker);
}

/* ---- workers ------------------------------------------------------------ */

static void on_pipe(struct ev_loop *loop, ev_io *io, int revents)
{
    (void)loop;
    (void)revents;
    char buf[64];
    while (syscall(SYS_read, io->fd, buf, sizeof buf) > 0)
        ;
}

static void poll_once(sp_scheduler_t *s, int worker, bool block)
{
    sp_iomanager_t *io = sp__iom_of(s);
    iom_worker_t *x = io->w[worker];
    /* A close in the inbox lets the loop look once more (destroy), and that
     * look may leave work the worker must not sleep on: fibers it found
     * ready (collected to run after the poll), a tickle it read from the pipe (the byte spent, its task
     * or inbox entry waiting), a callback task queued on this worker (a
     * worker never tickles itself). Then this poll does not block: the
     * worker goes round once more and sleeps on its next poll. */
    bool looked = sp__io_drain_inbox(io, worker);
    uint64_t first = block && !looked ? sp__timer_heap_first(&x->timers) : 0;
    if (block && !looked && (!first || first > sp__now_ns())) {
        sp__wake_before(x, first);
        ev_run(x->loop, EVRUN_ONCE);
        sp__wake_after(x);
    } else {
        ev_run(x->loop, EVRUN_NOWAIT);
    }
    sp__io_drain_inbox(io, worker);
    /* The fibers woken so far (fds, inbox) were collected before any that
     * the timers wake, and run first, right after the poll; a fiber whose
     * fd became ready and whose timeout passed too gets the readiness,
     * which was promised first. */
    sp__timer_heap_expire(&x->timers);
}

void sp__iom_idle(sp_scheduler_t *s, int worker)
{
    poll_once(s, worker, true);
}

static void iom_tick(sp_scheduler_t *s, int worker)
{
    poll_once(s, worker, false);
}

static void iom_exit(sp_scheduler_t *s, int worker)
{
    sp__io_worker_gone(sp__iom_of(s), worker);
}

/* A retiring extra worker may leave only when nothing needs its loop or
 * its heap any more (the scheduler already saw no task queued or homed
 * there): no armed timer, no armed watch. Only its own thread adds either
 * (timers and waits go on the caller's worker; callback events added from
 * outside go to base workers), so none appears once it stops running
 * tasks. */
static bool iom_may_leave(sp_scheduler_t *s, int worker)
{
    sp_iomanager_t *io = sp__iom_of(s);
    return !atomic_load(&io->w[worker]->timers.armed) &&
           sp__io_drop_idle(io, worker);
}

/* Deadline scopes' timers (scheduler_internal.h): inline, on the calling
 * worker's heap, so their callbacks run on the waiting fiber's thread. */
static int iom_timer_add(sp_scheduler_t *s, uint64_t delay_ns, void (*fn)(void *),
                         void *arg, uint64_t *id)
{
    sp__worker_t *self = sp__sched_self(s);
    if (!self)
        return -EPERM;
    return sp__timer_add_inline(sp__iom_timer_heap(sp__iom_of(s), self->index),
                                delay_ns, fn, arg, id);
}

static void iom_timer_cancel(sp_scheduler_t *s, uint64_t id)
{
    sp_timer_cancel(sp__iom_of(s), id);
}

/* The heap and inbox of slot `index`; no loop yet. `gone`: no thread will
 * run it until iom_spawn. */
static iom_worker_t *slot_new(sp_scheduler_t *s, int index, bool gone)
{
    iom_worker_t *x = aligned_alloc(64, (sizeof *x + 63) & ~(size_t)63);
    if (!x)
        return NULL;
    memset(x, 0, sizeof *x);
    x->pipe_rd = x->pipe_wr = x->tfd = -1;
    atomic_init(&x->inbox, NULL);
    pthread_mutex_init(&x->inbox_lock, NULL);
    pthread_mutex_init(&x->watches_lock, NULL);
    x->gone = gone;
    if (sp__timer_heap_init(&x->timers, s, index) != 0) {
        pthread_mutex_destroy(&x->inbox_lock);
        pthread_mutex_destroy(&x->watches_lock);
        free(x);
        return NULL;
    }
    return x;
}

/* The loop, the tickle pipe and the timer wake-up; on failure the slot is
 * left without any of them, so a later attempt starts clean. */
static int slot_open(iom_worker_t *x)
{
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    x->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    if (!x->loop)
        x->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOENV);
    if (!x->loop) {
        close(p[0]);
        close(p[1]);
        return -ENOMEM;
    }
    int rc = sp__wake_open(x);
    if (rc < 0) {
        ev_loop_destroy(x->loop);
        x->loop = NULL;
        close(p[0]);
        close(p[1]);
        return rc;
    }
    x->pipe_rd = p[0];
    x->pipe_wr = p[1];
    ev_set_userdata(x->loop, x);
    ev_set_invoke_pending_cb(x->loop, sp__io_invoke_pending);
    ev_io_init(&x->pipe_io, on_pipe, x->pipe_rd, EV_READ);
    ev_io_start(x->loop, &x->pipe_io);
    return 0;
}

static void slot_free(iom_worker_t *x)
{
    pthread_mutex_destroy(&x->inbox_lock);
    pthread_mutex_destroy(&x->watches_lock);
    if (x->loop)
        ev_loop_destroy(x->loop);
    sp__wake_close(x);
    if (x->pipe_rd >= 0) {
        close(x->pipe_rd);
        close(x->pipe_wr);
    }
    sp__timer_heap_fini(&x->timers);
    free(x);
}

/* Room for `cap` workers (the monitor may grow to that many); before
 * start, so no other thread reads io->w while it moves. */
static int iom_resize(sp_scheduler_t *s, int cap)
{
    sp_iomanager_t *io = sp__iom_of(s);
    if (cap <= io->nw)
        return 0;
    iom_worker_t **w = realloc(io->w, sizeof *w * (size_t)cap);
    if (!w)
        return -ENOMEM;
    io->w = w;
    for (; io->nw < cap; io->nw++)
        if (!(io->w[io->nw] = slot_new(s, io->nw, true)))
            return -ENOMEM;
    return 0;
}

/* Monitor thread, before extra worker `worker` starts (and before anyone
 * can tickle it): its loop on the first start, and an open inbox. */
static int iom_spawn(sp_scheduler_t *s, int worker)
{
    iom_worker_t *x = sp__iom_of(s)->w[worker];
    if (!x->loop) {
        int rc = slot_open(x);
        if (rc < 0)
            return rc;
    }
    pthread_mutex_lock(&x->inbox_lock);
    x->gone = false;
    pthread_mutex_unlock(&x->inbox_lock);
    return 0;
}

sp_iomanager_t *sp_iomanager_create(const char *name, int threads,
                                    bool use_caller)
{
    sp_iomanager_t *io = calloc(1, sizeof *io);
    if (!io) {
        errno = ENOMEM;
        return NULL;
    }
    int rc = sp__sched_init(&io->s, name ? name : "iomanager", threads,
                            use_caller);
    if (rc < 0) {
        free(io);
        errno = -rc;
        return NULL;
    }
    io->s.ops.idle = sp__iom_idle;
    io->s.ops.tickle = tickle;
    io->s.ops.tick = iom_tick;
    io->s.ops.exit = iom_exit;
    io->s.ops.resize = iom_resize;
    io->s.ops.spawn = iom_spawn;
    io->s.ops.may_leave = iom_may_leave;
    io->s.ops.timer_add = iom_timer_add;
    io->s.ops.timer_cancel = iom_timer_cancel;
    io->s.has_io = true;
    sp__hook_connect();
    rc = iom_resize(&io->s, threads);
    for (int i = 0; i < threads && rc == 0; i++) {
        io->w[i]->gone = false; /* base workers run from start to stop */
        rc = slot_open(io->w[i]);
    }
    if (rc < 0) {
        sp_iomanager_destroy(io);
        errno = -rc;
        return NULL;
    }
    return io;
}

int sp_iomanager_start(sp_iomanager_t *io)
{
    return sp_scheduler_start(&io->s);
}

int sp_iomanager_stop(sp_iomanager_t *io)
{
    return sp_scheduler_stop(&io->s);
}

void sp_iomanager_destroy(sp_iomanager_t *io)
{
    if (!io)
        return;
    sp__io_forget_all(io);
    for (int i = 0; i < io->nw; i++)
        slot_free(io->w[i]);
    free(io->w);
    sp__sched_monitor_free(&io->s);
    sp__sched_fini(&io->s);
    free(io);
}

