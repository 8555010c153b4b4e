/* sp_daemon_pid_file_check: the verdict on a pid file's place before the
 * daemon runs (one missing directory level is fine: the daemon creates
 * it). */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/daemon.h>

#include "testutil.h"

static char dir[64];

static void make_dir(void)
{
    sp_test_make_dir(dir, sizeof dir, "sp_pidcheck");
}

static void remove_dir(void)
{
    sp_test_remove_dir(dir);
}

static int check_in(const char *rest)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, rest);
    return sp_daemon_pid_file_check(path);
}

START_TEST(existing_or_one_missing_level_accepted)
{
    ck_assert_int_eq(check_in("p.pid"), 0);
    ck_assert_int_eq(check_in("run/p.pid"), 0);
    /* Only a verdict: nothing is created. */
    char run[96];
    snprintf(run, sizeof run, "%s/run", dir);
    ck_assert_int_eq(access(run, F_OK), -1);
    /* Relative: from the current directory. */
    ck_assert_int_eq(chdir(dir), 0);
    ck_assert_int_eq(sp_daemon_pid_file_check("p.pid"), 0);
    ck_assert_int_eq(sp_daemon_pid_file_check("run/p.pid"), 0);
    ck_assert_int_eq(sp_daemon_pid_file_check("a/b/p.pid"), -ENOENT);
}
END_TEST

START_TEST(places_the_daemon_cannot_use_refused)
{
    ck_assert_int_eq(sp_daemon_pid_file_check(dir), -EISDIR);
    ck_assert_int_eq(check_in("a/b/p.pid"), -ENOENT); /* two levels missing */
    char file[96];
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(check_in("file/p.pid"), -ENOTDIR);
    ck_assert_int_eq(check_in("file/x/p.pid"), -ENOTDIR);
    /* A directory name longer than any path. */
    char *longest = malloc(PATH_MAX + 16);
    memset(longest, 'd', PATH_MAX + 8);
    strcpy(longest + PATH_MAX + 8, "/p.pid");
    ck_assert_int_eq(sp_daemon_pid_file_check(longest), -ENAMETOOLONG);
    free(longest);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon_pid_check");
    TCase *tc = tcase_create("check");
    tcase_add_checked_fixture(tc, make_dir, remove_dir);
    tcase_add_test(tc, existing_or_one_missing_level_accepted);
    tcase_add_test(tc, places_the_daemon_cannot_use_refused);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
