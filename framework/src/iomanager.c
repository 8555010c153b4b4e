/* IOManager: a scheduler whose idle workers block in their own libev loop
 * (fd events live in io_event.c, timers in timer.c).
 *
 * Kicks use the same fence protocol as the scheduler's tickle: leave work,
 * fence, then write the pipe only if the worker is idle; an idle worker
 * sets its flag, fences, then drains its inbox and reads its timers before
 * blocking.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hook_bridge.h"
#include "iomanager_internal.h"

static void iom_idle(sp_scheduler_t *s, int worker);

sp_iomanager_t *sp__iom_of(sp_scheduler_t *s)
{
    return s && s->ops.idle == iom_idle ? (sp_iomanager_t *)s : NULL;
}

sp_iomanager_t *sp_iomanager_current(void)
{
    return sp__iom_of(sp_scheduler_current());
}

sp_scheduler_t *sp_iomanager_scheduler(sp_iomanager_t *io)
{
    return &io->s;
}

sp_timer_heap_t *sp__iom_timer_heap(sp_iomanager_t *io, int worker)
{
    return &io->w[worker].timers;
}

static void tickle(sp_scheduler_t *s, int worker)
{
    char c = 1;
    /* Raw syscalls for our own pipe: no trip through the hooks. */
    long r = syscall(SYS_write, sp__iom_of(s)->w[worker].pipe_wr, &c, 1);
    (void)r; /* a full pipe already guarantees a wake-up */
}

/* A busy worker looks at its inbox and timers before it next blocks, so
 * only a sleeping one needs the pipe. */
void sp__iom_kick(sp_iomanager_t *io, int worker)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&io->s.workers[worker].idle))
        tickle(&io->s, worker);
}

void sp__iom_timer_kick(sp_iomanager_t *io, int worker)
{
    sp__iom_kick(io, worker);
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

static void on_wake_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)t;
    (void)revents; /* only ends ev_run; timers are expired after it */
}

static void poll_once(sp_scheduler_t *s, int worker, bool block)
{
    sp_iomanager_t *io = sp__iom_of(s);
    iom_worker_t *x = &io->w[worker];
    sp__io_drain_inbox(io, worker);
    int64_t next = sp__timer_heap_next(&x->timers);
    if (block && next != 0) {
        if (next > 0) {
            /* Round up to whole microseconds: never wake before the
             * deadline (early wake-ups just re-arm). */
            ev_now_update(x->loop);
            ev_timer_set(&x->wake_timer, (double)(next + 999) / 1e9, 0.);
            ev_timer_start(x->loop, &x->wake_timer);
        }
        ev_run(x->loop, EVRUN_ONCE);
        ev_timer_stop(x->loop, &x->wake_timer);
    } else {
        ev_run(x->loop, EVRUN_NOWAIT);
    }
    sp__io_drain_inbox(io, worker);
    sp__timer_heap_expire(&x->timers);
}

static void iom_idle(sp_scheduler_t *s, int worker)
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

static int worker_init(iom_worker_t *x, sp_scheduler_t *s, int index)
{
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    x->pipe_rd = p[0];
    x->pipe_wr = p[1];
    x->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    if (!x->loop)
        x->loop = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOENV);
    if (!x->loop)
        return -ENOMEM;
    ev_io_init(&x->pipe_io, on_pipe, x->pipe_rd, EV_READ);
    ev_io_start(x->loop, &x->pipe_io);
    ev_init(&x->wake_timer, on_wake_timer);
    atomic_init(&x->inbox, NULL);
    pthread_mutex_init(&x->inbox_lock, NULL);
    return sp__timer_heap_init(&x->timers, s, index);
}

static void worker_fini(iom_worker_t *x)
{
    pthread_mutex_destroy(&x->inbox_lock);
    if (x->loop)
        ev_loop_destroy(x->loop);
    if (x->pipe_rd > 0) {
        close(x->pipe_rd);
        close(x->pipe_wr);
    }
    sp__timer_heap_fini(&x->timers);
}

sp_iomanager_t *sp_iomanager_create(const char *name, int threads,
                                    bool use_caller)
{
    sp_iomanager_t *io = calloc(1, sizeof *io);
    if (!io) {
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&io->watches_lock, NULL);
    int rc = sp__sched_init(&io->s, name ? name : "iomanager", threads,
                            use_caller);
    if (rc < 0) {
        pthread_mutex_destroy(&io->watches_lock);
        free(io);
        errno = -rc;
        return NULL;
    }
    io->s.ops.idle = iom_idle;
    io->s.ops.tickle = tickle;
    io->s.ops.tick = iom_tick;
    io->s.ops.exit = iom_exit;
    io->s.has_io = true;
    sp__hook_connect();
    io->w = calloc((size_t)threads, sizeof *io->w);
    rc = io->w ? 0 : -ENOMEM;
    for (int i = 0; i < threads && rc == 0; i++)
        rc = worker_init(&io->w[i], &io->s, i);
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
    pthread_mutex_destroy(&io->watches_lock);
    for (int i = 0; io->w && i < io->s.nworkers; i++)
        worker_fini(&io->w[i]);
    free(io->w);
    sp__monitor_free(&io->s);
    sp__sched_fini(&io->s);
    free(io);
}

