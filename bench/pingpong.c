/* pingpong: one byte each way over a socketpair, fibers against libev.
 *
 * Two fibers on ONE IOManager worker (1 thread, use_caller), one per end of
 * an AF_UNIX stream socketpair. The initiator writes a byte and waits for
 * the answer; the responder waits, reads and answers. A round trip is two
 * writes, two reads and two trips through the worker's libev loop, plus
 * two fiber switches each way.
 *
 *  - fiber:  sp_io_wait(fd, SP_IO_READ, -1), then syscall(SYS_read) /
 *            syscall(SYS_write): the IOManager's cost without the hooks.
 *  - libev:  the same exchange on a bare libev loop (epoll backend, as the
 *            IOManager's), two ev_io callbacks started once for the whole
 *            run: the floor the fiber version is compared with.
 *  - hooked: blocking-looking read()/write() through the hooks, reading
 *            into a 64-byte buffer as an echo loop would (a short read
 *            marks the socket drained, so the next read waits first).
 *  - hooked_exact: the same reading exactly 1 byte: the read is never
 *            short, so every read first tries the socket and meets EAGAIN.
 *
 * The variants take turns, 3 times; each figure is its best run, by the
 * wall clock and (_cpu) by this thread's CPU time, which all of it runs on.
 */
#include "bench.h"

#include <ev.h>
#include <sys/socket.h>
#include <unistd.h>

/* In the order they take turns; LIBEV is the reference. */
enum mode { RAW, LIBEV, HOOKED, HOOKED_EXACT, NMODES };

static const char *const mode_names[NMODES] = {"fiber", "libev", "hooked",
                                               "hooked_exact"};

typedef struct side {
    int fd;
    bool initiator;
    enum mode mode;
    long round_trips;
    double elapsed_ns; /* initiator: first write to last read */
    bool failed;
} side_t;

static bool send_byte(const side_t *s)
{
    if (s->mode == RAW)
        return sb_raw_write1(s->fd);
    char c = 1;
    return write(s->fd, &c, 1) == 1;
}

static bool recv_byte(const side_t *s)
{
    char buf[64];
    switch (s->mode) {
    case RAW:
        return sp_io_wait(s->fd, SP_IO_READ, -1) == 0 && sb_raw_read1(s->fd);
    case HOOKED:
        return read(s->fd, buf, sizeof buf) == 1;
    default:
        return read(s->fd, buf, 1) == 1;
    }
}

static void side_task(void *arg)
{
    side_t *s = arg;
    double t0 = sb_now_ns();
    for (long i = 0; i < s->round_trips && !s->failed; i++) {
        if (s->initiator)
            s->failed = !send_byte(s) || !recv_byte(s);
        else
            s->failed = !recv_byte(s) || !send_byte(s);
    }
    s->elapsed_ns = sb_now_ns() - t0;
    if (s->failed) /* the peer waits forever otherwise */
        shutdown(s->fd, SHUT_RDWR);
}

/* Elapsed ns of one fiber run, or -1. */
static double fiber_run(enum mode mode, long round_trips)
{
    int sv[2];
    /* The hooks manage only sockets the program believes blocking. */
    if (sb_socketpair(sv, mode == RAW) < 0)
        return -1;
    side_t sides[2] = {
        {.fd = sv[0], .initiator = true, .mode = mode, .round_trips = round_trips},
        {.fd = sv[1], .initiator = false, .mode = mode, .round_trips = round_trips},
    };
    int rc = sb_iom_run("pingpong", side_task, sides, sizeof sides[0], 2);
    if (mode != RAW && !sb_fd_kernel_nonblock(sv[0]))
        sb_note("pingpong: the hooks did not take over the socket");
    close(sv[0]);
    close(sv[1]);
    if (rc || sides[0].failed || sides[1].failed) {
        sb_note("pingpong: %s run failed", mode_names[mode]);
        return -1;
    }
    return sides[0].elapsed_ns;
}

/* ---- libev ------------------------------------------------------------- */

typedef struct ev_pingpong {
    ev_io ping, pong;
    long left;
    bool failed;
} ev_pingpong_t;

static void ev_fail(struct ev_loop *loop, ev_pingpong_t *p)
{
    p->failed = true;
    ev_break(loop, EVBREAK_ALL);
}

static void on_ping(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    ev_pingpong_t *p = w->data;
    if (!sb_raw_read1(w->fd))
        ev_fail(loop, p);
    else if (--p->left == 0)
        ev_break(loop, EVBREAK_ALL);
    else if (!sb_raw_write1(w->fd))
        ev_fail(loop, p);
}

static void on_pong(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    if (!sb_raw_read1(w->fd) || !sb_raw_write1(w->fd))
        ev_fail(loop, w->data);
}

static double libev_run(long round_trips)
{
    int sv[2];
    if (sb_socketpair(sv, true) < 0)
        return -1;
    struct ev_loop *loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
    if (!loop) {
        sb_note("pingpong: ev_loop_new failed");
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    ev_pingpong_t p = {.left = round_trips};
    ev_io_init(&p.ping, on_ping, sv[0], EV_READ);
    ev_io_init(&p.pong, on_pong, sv[1], EV_READ);
    p.ping.data = p.pong.data = &p;
    ev_io_start(loop, &p.ping);
    ev_io_start(loop, &p.pong);
    double t0 = sb_now_ns();
    if (sb_raw_write1(sv[0]))
        ev_run(loop, 0);
    else
        p.failed = true;
    double ns = sb_now_ns() - t0;
    ev_io_stop(loop, &p.ping);
    ev_io_stop(loop, &p.pong);
    ev_loop_destroy(loop);
    close(sv[0]);
    close(sv[1]);
    if (p.failed || p.left != 0) {
        sb_note("pingpong: libev run failed");
        return -1;
    }
    return ns;
}

/* ------------------------------------------------------------------------- */

static double run_mode(void *ctx, long round_trips)
{
    enum mode m = *(const enum mode *)ctx;
    return m == LIBEV ? libev_run(round_trips) : fiber_run(m, round_trips);
}

int sb_pingpong(long round_trips)
{
    enum mode modes[NMODES] = {RAW, LIBEV, HOOKED, HOOKED_EXACT};
    void *ctx[NMODES];
    for (int m = 0; m < NMODES; m++)
        ctx[m] = &modes[m];
    sb_best_t best[NMODES];
    if (sb_best_of_each(run_mode, ctx, NMODES, round_trips, 3, best) < 0)
        return 1;
    sb_note("pingpong: %ld round trips of 1 byte over a socketpair, one "
            "thread, best of 3",
            round_trips);
    for (int m = 0; m < NMODES; m++)
        sb_report_best("pingpong", mode_names[m], &best[m], (double)round_trips,
                       m == LIBEV ? NULL : &best[LIBEV], "libev");
    return 0;
}
