/* A server program of our own for the real-client tests (redis-server,
 * mariadbd, memcached): started as a child that dies with the test
 * (PR_SET_PDEATHSIG), without the test's LD_PRELOAD, its stdout and stderr
 * on a pipe we read while waiting for it to be ready and when stopping it
 * (for error messages). Between the two nobody reads: a server must not
 * print more than a pipe holds (64 KiB) meanwhile. Runs in Check's parent
 * process, from unchecked fixtures, so nothing here asserts; and without
 * threads, since Check forks each test from that process. */
#ifndef SP_REAL_SERVER_H
#define SP_REAL_SERVER_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct rs_server {
    pid_t pid;           /* -1 when not running */
    char error[512];     /* why it is not running, for the test to print */
    /* private */
    int out;             /* read end of its stdout + stderr */
    char log[8192];      /* the latest of what it printed */
    size_t log_len;
} rs_server_t;

/* Start argv[0] (a path) with argv and wait up to timeout_ms until its
 * output contains `ready`. true once it does; false with s->error set and
 * the child stopped if it exits or stays silent. */
bool rs_start(rs_server_t *s, char *const argv[], const char *ready, int timeout_ms);

/* Run a command of the same kind (argv[0] a path; no LD_PRELOAD, as for a
 * server) to its end within timeout_ms: true when it exits 0, else false
 * with s->error saying what it printed. */
bool rs_run(rs_server_t *s, char *const argv[], int timeout_ms);

/* Start a server on a free port: spawn(port) starts it on `port` (with
 * rs_start) and says whether it did. The free port may be taken again
 * before the server binds it, so up to 3 attempts, each with a fresh one.
 * The port, or -1 with s->error set. */
int rs_start_on_free_port(rs_server_t *s, bool (*spawn)(int port));

/* A new directory $TMPDIR/PREFIX-XXXXXX (/tmp without TMPDIR) in buf;
 * false with errno when it cannot be made. */
bool rs_make_dir(char *buf, size_t size, const char *prefix);

/* Remove a directory and everything in it; what cannot be removed is
 * left. */
void rs_remove_dir(const char *path);

/* SIGTERM, up to 10 s for it to close its output, then SIGKILL; reap it.
 * A no-op when it is not running. */
void rs_stop(rs_server_t *s);

#endif
