/* spindle-bench: the framework's micro-benchmarks, one subcommand each.
 *
 *   spindle-bench switch [round_trips]   context switch cost per backend
 *   spindle-bench spawn  [tasks]         spawn + run + exit of a task
 *   spindle-bench parked [fibers]        memory per parked fiber
 *   spindle-bench dump [fibers]          a fiber dump of that many parked
 *   spindle-bench wake   [round_trips]   cross-worker park/wake
 *   spindle-bench interrupt [round_trips] cross-worker interrupt of a park
 *   spindle-bench idle   [seconds]       CPU of an idle scheduler
 *   spindle-bench pingpong [round_trips] socketpair ping-pong: fibers vs libev
 *   spindle-bench timers [timers]        timer insert + cancel
 *   spindle-bench tickle [samples]       wake-up latency of a sleeping worker
 *   spindle-bench sleepers [fibers]      hooked sleep() in many fibers
 *   spindle-bench lateness [fibers]      how late sleeps end: fibers vs a thread
 *   spindle-bench hooked_rw [pairs]      hooked read/write vs raw syscalls
 *   spindle-bench sync [iterations]      fiber mutex and channel costs
 *   spindle-bench monitor [yields]       hot-path cost of the blocking monitor
 *   spindle-bench all                    all of them with defaults
 *
 * Every figure is a stdout line `name value unit`; notes go to stderr.
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench {
    const char *name;
    int (*run)(long arg);
    long dflt;
    const char *arg_name;
} bench_t;

/* `all` runs them in this order; dump and parked go last because a stall
 * there ends the process (see parked.c). */
static const bench_t benches[] = {
    {"switch", sb_switch, 10000000, "round_trips"},
    {"spawn", sb_spawn, 1000000, "tasks"},
    {"wake", sb_wake, 100000, "round_trips"},
    {"interrupt", sb_interrupt, 100000, "round_trips"},
    {"idle", sb_idle, 2, "seconds"},
    {"pingpong", sb_pingpong, 200000, "round_trips"},
    {"timers", sb_timers, 1000000, "timers"},
    {"tickle", sb_tickle, 10000, "samples"},
    {"sleepers", sb_sleepers, 1000, "fibers"},
    {"lateness", sb_lateness, 10000, "fibers"},
    {"hooked_rw", sb_hooked_rw, 1000000, "pairs"},
    {"sync", sb_sync, 1000000, "iterations"},
    {"monitor", sb_monitor, 2000000, "yields"},
    {"dump", sb_dump, 100000, "fibers"},
    {"parked", sb_parked, 1000000, "fibers"},
};
enum { NBENCH = sizeof benches / sizeof benches[0] };

static int usage(void)
{
    fprintf(stderr, "usage: spindle-bench all\n");
    for (int i = 0; i < NBENCH; i++)
        fprintf(stderr, "       spindle-bench %s [%s, default %ld]\n",
                benches[i].name, benches[i].arg_name, benches[i].dflt);
    return 2;
}

/* A positive count, or -1. */
static long parse_count(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || end == s || v <= 0 ? -1 : v;
}

static int run_all(void)
{
    int bad = 0;
    for (int i = 0; i < NBENCH; i++)
        bad |= benches[i].run(benches[i].dflt);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3)
        return usage();
    if (strcmp(argv[1], "all") == 0)
        return argc == 2 ? run_all() : usage();
    for (int i = 0; i < NBENCH; i++) {
        if (strcmp(argv[1], benches[i].name) != 0)
            continue;
        long arg = argc == 3 ? parse_count(argv[2]) : benches[i].dflt;
        return arg > 0 ? benches[i].run(arg) : usage();
    }
    return usage();
}
