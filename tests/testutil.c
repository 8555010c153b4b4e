#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

TCase *sp_test_case(Suite *s, const char *name, double timeout, sp_test_fixture_fn setup,
                    sp_test_fixture_fn teardown, const TTest *const *tests, size_t n)
{
    TCase *tc = tcase_create(name);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    if (setup)
        tcase_add_checked_fixture(tc, setup, teardown);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return tc;
}

int sp_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

double sp_test_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

void sp_test_make_dir(char *buf, size_t size, const char *prefix)
{
    ck_assert_int_lt(snprintf(buf, size, "/tmp/%s-XXXXXX", prefix), (int)size);
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

void sp_test_remove_dir(const char *path)
{
    char cmd[512];
    ck_assert_int_lt(snprintf(cmd, sizeof cmd, "rm -rf '%s'", path), (int)sizeof cmd);
    ck_assert_int_eq(system(cmd), 0);
}
