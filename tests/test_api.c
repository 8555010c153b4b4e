/* The umbrella header, the version and sp_strerror, through the public
 * headers only. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <spindle/spindle.h>

#include "testutil.h"

START_TEST(version_matches_the_headers)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", SP_VERSION_MAJOR, SP_VERSION_MINOR,
             SP_VERSION_PATCH);
    ck_assert_str_eq(sp_version(), want);
    ck_assert_int_eq(SP_VERSION_NUMBER,
                     SP_VERSION_MAJOR * 65536 + SP_VERSION_MINOR * 256 + SP_VERSION_PATCH);
}
END_TEST

START_TEST(strerror_of_negative_errno)
{
    ck_assert_str_eq(sp_strerror(-ETIMEDOUT), "Connection timed out");
    ck_assert_str_eq(sp_strerror(-ECANCELED), "Operation canceled");
    ck_assert_str_eq(sp_strerror(0), "Success");
    ck_assert_str_eq(sp_strerror(7), "Success");
    ck_assert_str_eq(sp_strerror(-100000), "Unknown error");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_add_test(tc, version_matches_the_headers);
    tcase_add_test(tc, strerror_of_negative_errno);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
