/* The checks the real-client tests share (test_real_clients,
 * test_real_mariadb, test_real_memcached). */
#ifndef SP_REAL_CHECK_H
#define SP_REAL_CHECK_H

#include <sys/types.h>

#include "clients.h"

#ifndef SP_FLAVOUR
#define SP_FLAVOUR "linked" /* or "preload", set by tests/CMakeLists.txt */
/* Stop the server `pid` (SIGSTOP) for a run with a stall, after a first
 * run `one` of one request that must have worked (it also attaches
 * preloaded hooks, which come with the first IOManager), and after
 * checking that the hooks are present: without them the first request
 * would block the worker, and with it the fiber that resumes the server. */
void rc_stop_server(pid_t pid, const hc_result_t *one);

/* hc_stall_t's resume for a server stopped so: arg points to its pid_t;
 * sends SIGCONT. */
void rc_resume_server(void *arg);

/* A run with a stall (hc_stall_t) against a server stopped beforehand:
 * the watcher saw all `fibers` requests started and parked at once on the
 * one worker, and after the server went on every request succeeded.
 * Prints the time of the run. */
void rc_check_stalled(const char *what, int fibers, const hc_result_t *many);

#endif

/* One request alone worked, all `fibers` at once worked with the hooks
 * present, each waited at least about delay_ms on the server, and together
 * they took less than 2 s (one after another: fibers * delay_ms). Prints
 * the times. */
void rc_check_overlap(const char *what, int fibers, int delay_ms,
                      const hc_result_t *one, const hc_result_t *many);

/* Stop the server `pid` (SIGSTOP) for a run with a stall, after a first
 * run `one` of one request that must have worked (it also attaches
 * preloaded hooks, which come with the first IOManager), and after
 * checking that the hooks are present: without them the first request
 * would block the worker, and with it the fiber that resumes the server. */
void rc_stop_server(pid_t pid, const hc_result_t *one);

/* hc_stall_t's resume for a server stopped so: arg points to its pid_t;
 * sends SIGCONT. */
void rc_resume_server(void *arg);

/* A run with a stall (hc_stall_t) against a server stopped beforehand:
 * the watcher saw all `fibers` requests started and parked at once on the
 * one worker, and after the server went on every request succeeded.
 * Prints the time of the run. */
void rc_check_stalled(const char *what, int fibers, const hc_result_t *many);

#endif
