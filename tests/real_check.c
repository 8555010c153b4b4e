/* See real_check.h. */
#include "real_check.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>

#include <spindle/hook.h>

#define MS 1000000ull

void rc_check_overlap(const char *what, int fibers, int delay_ms,
                      const hc_result_t *one, const hc_result_t *many)
{
    ck_assert_msg(one->ok == 1, "%s: one request failed: %s", what, one->error);
    ck_assert_msg(many->hooked, "%s: no hooks in this process", what);
    ck_assert_msg(many->fibers == fibers && many->ok == fibers,
                  "%s: %d of %d fibers ok; first failure: %s", what, many->ok,
                  many->fibers, many->error);
    /* Every request really waited on the server... */
    ck_assert_uint_ge(many->min_ns, (uint64_t)(delay_ms - 10) * MS);
    ck_assert_uint_ge(many->wall_ns, (uint64_t)delay_ms * MS);
    /* ...and they overlapped: one after another they would take
     * fibers * delay_ms (20 s and more). */
    ck_assert_msg(many->wall_ns < 2000 * MS,
                  "%s: %d requests took %.1f ms on one worker", what, fibers,
                  hc_ms(many->wall_ns));
    printf("%s (%s): 1 request %.1f ms; %d fibers on one worker %.1f ms "
           "(serial ~%.0f ms), each %.1f .. %.1f ms\n",
           what, SP_FLAVOUR, hc_ms(one->wall_ns), fibers, hc_ms(many->wall_ns),
           hc_ms(one->wall_ns) * fibers, hc_ms(many->min_ns), hc_ms(many->max_ns));
}

void rc_check_stalled(const char *what, int fibers, const hc_result_t *many)
{
    ck_assert_msg(many->hooked, "%s: no hooks in this process", what);
    ck_assert_msg(many->stalled, "%s: %d fibers started, at most %d requests at once; "
                  "never all of them parked while the server was stopped (first "
                  "failure: %s)", what, many->fibers, many->peak_in_flight, many->error);
    ck_assert_int_eq(many->peak_in_flight, fibers);
    ck_assert_msg(many->fibers == fibers && many->ok == fibers,
                  "%s: %d of %d fibers ok; first failure: %s", what, many->ok,
                  many->fibers, many->error);
    printf("%s (%s): %d requests parked at once on one worker while the server "
           "was stopped; run %.1f ms, each %.1f .. %.1f ms\n",
           what, SP_FLAVOUR, fibers, hc_ms(many->wall_ns), hc_ms(many->min_ns),
           hc_ms(many->max_ns));
}

void rc_stop_server(pid_t pid, const hc_result_t *one)
{
    ck_assert_msg(one->ok == 1, "one request failed: %s", one->error);
    ck_assert_msg(sp_hook_available(), "no hooks in this process");
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
}

void rc_resume_server(void *arg)
{
    kill(*(pid_t *)arg, SIGCONT);
}
