/* Shared by the Check test programs. */
#ifndef SP_TESTUTIL_H
#define SP_TESTUTIL_H

#include <check.h>

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
