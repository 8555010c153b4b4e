/* sp_park / sp_wake's token, white-box (sched/scheduler_internal.h): sp_wake
 * is two steps, setting the target's token (uwake) and then ending its
 * published park, if any. Taken apart on one worker, the target's sp_park
 * consumes the token on its way in and parks again before the waker's
 * second step: that step must not end the new park, or one wake makes two
 * sp_park calls return. */
#include <check.h>
#include <stdatomic.h>

#include "sched/scheduler_internal.h"
#include "task_util.h"
#include "testutil.h"

enum { MAX_YIELDS = 100000 }; /* far more than the few the steps take */

typedef struct {
    sp_fiber_t *target;
    atomic_bool go;    /* the token is set: the target may park */
    atomic_int returns; /* the target's sp_park calls that returned */
} token_race_t;

static int target_main(void *arg)
{
    token_race_t *r = arg;
    for (int i = 0; i < MAX_YIELDS && !atomic_load(&r->go); i++)
        sp_yield();
    ck_assert_int_eq(sp_park(), 0); /* the token, taken on the way in */
    atomic_fetch_add(&r->returns, 1);
    ck_assert_int_eq(sp_park(), 0); /* only the second sp_wake ends this */
    atomic_fetch_add(&r->returns, 1);
    return 0;
}

static int waker_main(void *arg)
{
    token_race_t *r = arg;
    struct sp_fiber *t = r->target;
    atomic_store(&t->uwake, 1); /* sp_wake's first step */
    atomic_store(&r->go, true);
    /* The target takes the token and publishes its second park. */
    int i = 0;
    while (!atomic_load(&t->cur_wait) && i++ < MAX_YIELDS)
        sp_yield();
    ck_assert_int_eq(atomic_load(&r->returns), 1);
    sp__fiber_end_wait(t, true, 0); /* sp_wake's second step, late */
    for (i = 0; i < 10; i++) /* a target woken by it runs now */
        sp_yield();
    ck_assert_int_eq(atomic_load(&r->returns), 1);
    ck_assert_int_eq(sp_wake(t), 0);
    return 0;
}

START_TEST(wake_whose_token_was_taken_ends_no_later_park)
{
    sp_iomanager_t *io = io_new(1);
    static token_race_t r; /* zero: no token yet, no returns */
    r.target = go_on(io, target_main, &r, 0);
    ck_assert_int_eq(join(go_on(io, waker_main, &r, 0)), 0);
    ck_assert_int_eq(join(r.target), 0);
    ck_assert_int_eq(atomic_load(&r.returns), 2);
    io_end(io);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("park_internal");
    TCase *tc = tcase_create("token");
    tcase_add_test(tc, wake_whose_token_was_taken_ends_no_later_park);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
