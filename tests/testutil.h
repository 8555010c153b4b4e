/* Shared by the Check test programs. */
#ifndef SP_TESTUTIL_H
#define SP_TESTUTIL_H

#include <check.h>

typedef void (*sp_test_fixture_fn)(void);

/* A test case of s: its time bound in seconds (0: Check's default,
 * CK_DEFAULT_TIMEOUT), its checked fixture (setup NULL: none) and its
 * tests; returns it (for more fixtures). SP_TEST_CASE takes the tests as
 * arguments. */
TCase *sp_test_case(Suite *s, const char *name, double timeout, sp_test_fixture_fn setup,
                    sp_test_fixture_fn teardown, const TTest *const *tests, size_t n);
#define SP_TEST_CASE(s, name, timeout, setup, teardown, ...)                              \
    sp_test_case(s, name, timeout, setup, teardown, (const TTest *const[]){__VA_ARGS__}, \
                 sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *))

/* Run every test of the suite (each in its own process, Check's default);
 * the exit status for main(). */
int sp_test_run(Suite *s);
/* CPU time (user + system) used by this process so far, in seconds. */
double sp_test_cpu_seconds(void);
/* A new directory /tmp/PREFIX-XXXXXX, its path in buf; fails the test
 * when it cannot be made. */
void sp_test_make_dir(char *buf, size_t size, const char *prefix);
/* Remove a directory and everything in it. */
void sp_test_remove_dir(const char *path);

#endif
