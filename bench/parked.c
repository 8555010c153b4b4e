/* parked: memory per parked fiber. dump: the same, then the time of a
 * fiber dump (debug.h) of them all, text and JSON, written to /dev/null.
 *
 * N scheduler tasks each record their fiber and call sp_park(); with all of
 * them parked we read VmRSS (and VmPTE, the page tables, which VmRSS does
 * not include) and the number of mappings, then wake them all and stop.
 * One worker thread holds the fibers while this thread measures.
 *
 * A fiber that cannot get a stack (ENOMEM, or mmap refused because the
 * process hit vm.max_map_count) is retried by the worker forever, so
 * progress is watched: if the parked count stops growing we report how far
 * it got and exit without stop(), which could never return.
 */
#include "bench.h"

#include <spindle/debug.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { POLL_MS = 10, STALL_MS = 5000 };

static _Atomic long parked_count;

static void park_task(void *arg)
{
    sp_fiber_t **slot = arg;
    *slot = sp_fiber_current();
    /* Release: the waker reads *slot after seeing the count. */
    atomic_fetch_add_explicit(&parked_count, 1, memory_order_release);
    sp_park();
}

/* Schedule up to n parking tasks; returns how many were accepted. */
static long submit(sp_scheduler_t *s, sp_fiber_t **slots, long n)
{
    for (long i = 0; i < n; i++) {
        int rc = sp_schedule(s, park_task, &slots[i], SP_ANY_WORKER);
        if (rc < 0) {
            sb_note("parked: sp_schedule refused task %ld: %s", i,
                    strerror(-rc));
            return i;
        }
    }
    return n;
}

/* Wait until `want` tasks have parked, or until the count has not moved
 * for STALL_MS. Returns the count reached. */
static long wait_parked(long want)
{
    long seen = 0, still_ms = 0;
    while (still_ms < STALL_MS) {
        long now = atomic_load_explicit(&parked_count, memory_order_acquire);
        if (now == want)
            return now;
        still_ms = now == seen ? still_ms + POLL_MS : 0;
        seen = now;
        sb_sleep_ms(POLL_MS);
    }
    return seen;
}

typedef struct mem_sample {
    long rss_kib, pte_kib, maps;
} mem_sample_t;

static mem_sample_t sample(void)
{
    mem_sample_t m = {sb_status_kib("VmRSS"), sb_status_kib("VmPTE"),
                      sb_map_count()};
    return m;
}

static void report_memory(long count, mem_sample_t before, mem_sample_t after,
                          double create_ns)
{
    sb_report("parked.count", (double)count, "fibers");
    if (count == 0)
        return;
    double n = (double)count;
    sb_report("parked.rss_per_fiber", (double)(after.rss_kib - before.rss_kib) / n,
              "KiB");
    sb_report("parked.pte_per_fiber", (double)(after.pte_kib - before.pte_kib) / n,
              "KiB");
    sb_report("parked.maps", (double)after.maps, "mappings");
    sb_report("parked.max_map_count", (double)sb_file_long("/proc/sys/vm/max_map_count"),
              "mappings");
    if (create_ns >= 0) /* not when stalled: that time is the stall */
        sb_report("parked.create", create_ns / n, "ns");
}

/* One dump of everything, timed; what sp_fibers_dump returned. */
static int time_dump(unsigned flags, const char *name)
{
    FILE *out = fopen("/dev/null", "w");
    if (!out)
        return -1;
    double t0 = sb_now_ns();
    int listed = sp_fibers_dump(out, flags);
    sb_report(name, (sb_now_ns() - t0) / 1e9, "s");
    fclose(out);
    return listed;
}

static int run(long fibers, bool dump)
{
    /* Allocated and touched before the baseline so the bookkeeping array
     * is not charged to the fibers. */
    sp_fiber_t **slots = malloc((size_t)fibers * sizeof *slots);
    if (!slots) {
        sb_note("parked: cannot allocate %ld slots", fibers);
        return 1;
    }
    memset(slots, 0, (size_t)fibers * sizeof *slots);
    atomic_store(&parked_count, 0);
    sp_scheduler_t *s = sb_sched_new("parked", 1, false);
    mem_sample_t before = sample();
    double t0 = sb_now_ns();
    long submitted = submit(s, slots, fibers);
    long count = wait_parked(submitted);
    double t1 = sb_now_ns();
    report_memory(count, before, sample(), count == submitted ? t1 - t0 : -1);
    if (dump && count == submitted) {
        sb_report("dump.fibers", time_dump(0, "dump.text"), "fibers");
        time_dump(SP_DUMP_JSON, "dump.json");
        t1 = sb_now_ns();
    }
    if (count < submitted) {
        sb_note("parked: stalled at %ld of %ld parked fibers (likely ENOMEM or "
                "vm.max_map_count; %ld mappings now); exiting without stop()",
                count, submitted, sb_map_count());
        fflush(stdout);
        _exit(2);
    }
    for (long i = 0; i < count; i++)
        sp_wake(slots[i]);
    int rc = sb_sched_end(s);
    if (count > 0) {
        sb_report("parked.wake_and_finish", (sb_now_ns() - t1) / (double)count,
                  "ns");
        /* What the stack pool keeps once every fiber has finished. */
        sb_report("parked.rss_retained_per_fiber",
                  (double)(sample().rss_kib - before.rss_kib) / (double)count,
                  "KiB");
    }
    free(slots);
    return rc < 0 || count < fibers;
}

int sb_parked(long fibers)
{
    return run(fibers, false);
}

int sb_dump(long fibers)
{
    return run(fibers, true);
}
