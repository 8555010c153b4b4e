/* idle: CPU used by a started scheduler with nothing to do. Workers must
 * sleep, not poll (ARCHITECTURE.md: an idle process uses 0% CPU), so the
 * expected figure is 0 plus thread start-up noise. */
#include "bench.h"

int sb_idle(long seconds)
{
    sp_scheduler_t *s = sb_sched_new("idle", 2, false);
    double cpu0 = sb_cpu_seconds();
    double t0 = sb_now_ns();
    sb_sleep_ms(seconds * 1000);
    double cpu = sb_cpu_seconds() - cpu0;
    double wall = (sb_now_ns() - t0) / 1e9;
    int rc = sb_sched_end(s);
    sb_note("idle: 2 workers, %ld s; 100%% = one core busy", seconds);
    sb_report("idle.cpu_percent", 100.0 * cpu / wall, "%");
    return rc < 0;
}
