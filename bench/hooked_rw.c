/* hooked_rw: what the read/write hooks add to a call that does not block.
 *
 * A fiber on an IOManager worker writes one byte into one end of a
 * socketpair and reads it back from the other end, N times: with write()
 * and read(), which go through the hooks (the socket was created blocking,
 * so the hooks manage it: O_NONBLOCK underneath, try the call, park only
 * on EAGAIN, which never happens here), and with syscall(SYS_write) /
 * syscall(SYS_read), which skip both the hooks and libc. Best of 3 each,
 * taking turns. The read asks for exactly the byte that is there, so it is
 * never short and never arms a wait.
 *
 * The same two loops on the main thread outside any IOManager (hooks off:
 * the hooked calls are plain libc) give the reference. Figures are the
 * best by the wall clock and (_cpu) by this thread's CPU time.
 */
#include "bench.h"

#include <spindle/hook.h>
#include <stdio.h>
#include <unistd.h>

typedef struct rw_run {
    int sv[2];
    bool raw; /* syscall(), else the hooked libc calls */
} rw_run_t;

/* Elapsed ns of n pairs, or -1 if a call did not move its byte. */
static double rw_pairs(void *ctx, long n)
{
    const rw_run_t *r = ctx;
    char c = 1;
    bool ok = true;
    double t0 = sb_now_ns();
    if (r->raw) {
        for (long i = 0; i < n && ok; i++)
            ok = sb_raw_write1(r->sv[0]) && sb_raw_read1(r->sv[1]);
    } else {
        for (long i = 0; i < n && ok; i++)
            ok = write(r->sv[0], &c, 1) == 1 && read(r->sv[1], &c, 1) == 1;
    }
    double ns = sb_now_ns() - t0;
    return ok ? ns : -1;
}

typedef struct rw_bench {
    int sv[2];
    long n;
    sb_best_t best[2]; /* best of 3: hooked, raw */
    bool failed;
} rw_bench_t;

static void measure(rw_bench_t *b)
{
    rw_run_t hooked = {{b->sv[0], b->sv[1]}, false};
    rw_run_t raw = {{b->sv[0], b->sv[1]}, true};
    void *ctx[2] = {&hooked, &raw};
    b->failed = sb_best_of_each(rw_pairs, ctx, 2, b->n, 3, b->best) < 0;
}

static void fiber_measure(void *arg)
{
    rw_bench_t *b = arg;
    if (!sp_hook_is_enabled()) {
        sb_note("hooked_rw: hooks are off in the fiber");
        b->failed = true;
        return;
    }
    measure(b);
}

static int report(const char *where, const rw_bench_t *b)
{
    if (b->failed) {
        sb_note("hooked_rw: %s: a read or write failed", where);
        return 1;
    }
    char hooked[32], raw[32];
    snprintf(hooked, sizeof hooked, "%s_hooked", where);
    snprintf(raw, sizeof raw, "%s_raw", where);
    sb_report_best("hooked_rw", raw, &b->best[1], (double)b->n, NULL, NULL);
    sb_report_best("hooked_rw", hooked, &b->best[0], (double)b->n, &b->best[1],
                   "raw");
    return 0;
}

int sb_hooked_rw(long n)
{
    rw_bench_t fiber = {.n = n};
    if (sb_socketpair(fiber.sv, false) < 0)
        return 1;
    sb_note("hooked_rw: %ld x (write 1 byte, read it back) on a socketpair, "
            "best of 3; in a fiber on an IOManager worker, then on the main "
            "thread (hooks off)",
            n);
    int bad = sb_iom_run("hooked_rw", fiber_measure, &fiber, 0, 1);
    if (!fiber.failed && !sb_fd_kernel_nonblock(fiber.sv[0])) {
        sb_note("hooked_rw: the hooks did not take over the socket");
        bad = 1;
    }
    bad |= report("fiber", &fiber);
    rw_bench_t thread = {.sv = {fiber.sv[0], fiber.sv[1]}, .n = n};
    measure(&thread);
    bad |= report("thread", &thread);
    close(fiber.sv[0]);
    close(fiber.sv[1]);
    return bad;
}
