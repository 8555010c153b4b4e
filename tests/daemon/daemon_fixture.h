/* The daemon tests' shared parts (tests/daemon/test_daemon_*.c): spindled
 * (the SPINDLED path) started on port 0 in a temporary directory, talked to
 * over plain sockets. Every wait is bounded. */
#ifndef SP_DAEMON_FIXTURE_H
#define SP_DAEMON_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "testutil.h"

typedef struct proc {
    pid_t pid;
    int out, err; /* its stdout and stderr (read ends) */
    char buf[4096];
    size_t len; /* bytes of stdout read and not yet taken as lines */
    int http_port, https_port, echo_port, admin_port; /* 0: not listening */
    long worker;
} proc_t;

extern char dir[96];        /* this test's temporary directory */
extern char conf_path[160]; /* dir/spindle.yml */
extern char pid_path[160];  /* dir/spindled.pid */

/* CLOCK_MONOTONIC in ms, and the ms left until a deadline on it (>= 0). */
int64_t now_ms(void);
int left_ms(int64_t deadline);

void write_file(const char *path, const char *text);

/* A configuration on port 0 with a pid file, plus `extra` YAML lines. */
void write_config(const char *extra);

/* Daemons this test started and has not reaped. A failed assertion ends
 * the test process with exit(): the atexit handler then stops them, so
 * no daemon outlives a failing test. */
extern pid_t live[16];

void track(pid_t pid, bool on);

void stop_leftovers(void);

/* Every test's directory is made inside `base`, which the runner process
 * creates before and removes after all tests: a failed test's process
 * ends without its teardown, and its files still go. */
extern char base[64];

void remove_tree(const char *path);

/* The runner's fixture: `base` made, and removed with all in it. */
void make_base(void);
void remove_base(void);

/* Every test: its directory in `base`, conf_path and pid_path in it. */
void setup(void);
void teardown(void);

/* Start spindled in directory cwd (NULL: ours) with args (NULL-terminated,
 * after argv[0]). */
void spawn_in(proc_t *p, const char *cwd, const char *const *args);

void spawn(proc_t *p, const char *const *args);

/* The next stdout line (without '\n') within the deadline, or NULL. */
const char *next_line(proc_t *p, int64_t deadline, char *line, size_t size);

/* Read "listening on ..." lines up to "worker pid N": the ports and pid of
 * the worker that just started. false when none came in time. */
bool await_worker(proc_t *p, int64_t deadline);

void start_daemon(proc_t *p);

/* SIGKILL the worker and wait (5 s) for the supervisor's next one, whose
 * pid and ports p then holds (0: a server it does not run). */
void restart_worker(proc_t *p);

/* Wait for the process to exit (a pidfd: no polling loop); its status, or
 * -1 on timeout. */
int wait_exit(pid_t pid, int timeout_ms);

/* stderr until `until` shows up in it (NULL: until the process closes
 * it), within 10 s. */
const char *read_err_until(proc_t *p, const char *until, char *buf, size_t size);

const char *read_err(proc_t *p, char *buf, size_t size);

void close_proc(proc_t *p);

void stop_daemon(proc_t *p);

int connect_port(int port);

void send_get(int fd, const char *path);

/* One response (headers + Content-Length body) into buf; its status, 0
 * when the connection closed first, -1 on timeout. */
int read_response(int fd, char *buf, size_t size, int64_t deadline);

/* GET on a new connection; the status, or <= 0 when it failed. */
int get(int port, const char *path, char *buf, size_t size, int64_t deadline);

/* The value of "key": in the /status body, or -1. */
long status_field(int port, const char *key);

/* Wait (bounded) until /status shows key == value. */
bool await_status(int port, const char *key, long value, int timeout_ms);

/* A new connection to the echo service that got "ping" back, left open. */
int echo_ping(int port);

/* Run spindled in cwd (NULL: ours) to completion with args; its exit
 * status, stdout in out. */
int run_in_to_end(const char *cwd, const char *const *args, char *out, size_t size,
                  char *err, size_t esize);

int run_to_end(const char *const *args, char *out, size_t size, char *err, size_t esize);

/* A process that is not our child: wait on its pidfd. */
bool await_gone(pid_t pid, int timeout_ms);

#endif
