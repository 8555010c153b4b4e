/* spindle daemon runner: detach, pid file, and a supervisor that restarts
 * the worker process.
 *
 *   caller ──(detach: fork, setsid, fork; chdir /, stdio → /dev/null)──▶
 *   supervisor: holds the pid-file lock, forks the worker, restarts it
 *               when it dies abnormally, forwards SIGTERM/SIGINT/SIGHUP
 *               and SIGQUIT
 *   worker:     runs worker(arg) with SIGTERM, SIGINT and SIGHUP blocked
 *               (in every thread it starts); it takes them with sigwait()
 *               (sp_daemon_wait_signal) in one plain thread.
 *
 * Pid file: opened, locked with fcntl(F_SETLK) for the life of the
 * supervisor and filled with its pid. A second instance finds the lock
 * taken and refuses to start, naming the file and the running pid. The
 * worker does not hold the descriptor (close-on-exec, closed after fork).
 * Its directory is created when missing (one level). Refused, exit 1: a
 * symbolic link (never followed), anything but a regular file of ours
 * with a single link, and a directory writable by others unless sticky.
 *
 * Restarts: a worker killed by a signal or exiting non-zero is restarted
 * after a back-off that starts at backoff_min and doubles up to
 * backoff_max; it resets once a worker stayed up for `stable`. The reason
 * of every death goes to the "spindle.daemon" logger. A worker that exits
 * 0 on its own ends the supervisor (exit 0). The supervisor gives up,
 * exiting with the last worker's status (128 + signal when killed), when
 * SP_DAEMON_CRASH_LOOP workers in a row fail at start (within
 * SP_DAEMON_CRASH_WINDOW_US, or with notify_ready before they called
 * sp_daemon_ready(), however long that took), and with notify_ready when the
 * first worker exits non-zero before it called sp_daemon_ready() (it could
 * not start: an address in use, say; retrying would not help).
 *
 * The worker dies with the supervisor: it gets SIGKILL when the
 * supervisor ends without stopping it (killed with SIGKILL, say), so no
 * orphan keeps serving beside a new instance.
 *
 * Stop: SIGTERM or SIGINT to the supervisor is forwarded to the worker,
 * which stops gracefully and exits 0; the supervisor then removes the pid
 * file and returns the worker's status. SIGHUP is forwarded: the worker
 * reloads its configuration and reopens its log files. SIGQUIT is
 * forwarded only: the worker has its default disposition (quit with a
 * core) unless it installs its own, e.g. sp_fibers_dump_on_signal_to_log.
 *
 * Errors: functions return 0 / an exit status, or a negative errno.
 */
#ifndef SPINDLE_DAEMON_H
#define SPINDLE_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The worker's body: returns the process's exit status. */
typedef int (*sp_daemon_fn)(void *arg);

typedef struct sp_daemon_opts {
    const char *name;     /* in messages; NULL = "spindle" */
    bool detach;          /* go to the background (-d) */
    const char *pid_file; /* NULL or "" = none; a relative path is taken
                             from the directory at the call */
    bool no_supervisor;   /* run worker() in this process, no restarts */
    int64_t backoff_min_us; /* first restart delay; 0 = 100 ms */
    int64_t backoff_max_us; /* 0 = 5 s */
    int64_t stable_us;      /* uptime that resets the back-off; 0 = 10 s */
    bool notify_ready;      /* the worker calls sp_daemon_ready() */
} sp_daemon_opts_t;

#define SP_DAEMON_DEFAULT_BACKOFF_MIN_US 100000
#define SP_DAEMON_DEFAULT_BACKOFF_MAX_US 5000000
#define SP_DAEMON_DEFAULT_STABLE_US 10000000
#define SP_DAEMON_CRASH_LOOP 5
#define SP_DAEMON_CRASH_WINDOW_US 1000000

/* Run worker(arg) as described above. Returns in the supervisor (or the
 * only process with no_supervisor) the exit status to use: the worker's
 * status after a requested stop, 1 when the pid file is locked by another
 * instance or cannot be written (the message is on stderr and the log),
 * the last worker's status when the supervisor gave up (see Restarts).
 * With detach, the original process exits 0 inside this call once the
 * daemon holds its pid file (with notify_ready: and its first worker
 * called sp_daemon_ready()), or 1 if it could not; the terminal's stdio
 * is kept until then, so the reason of a failure reaches the user. Never returns in the
 * worker: it exits with worker()'s status. */
int sp_daemon_run(const sp_daemon_opts_t *opts, sp_daemon_fn worker, void *arg);

/* In the worker, with notify_ready: it serves (its sockets are bound).
 * Does nothing elsewhere or when called again. */
void sp_daemon_ready(void);

/* In a worker: how many times its supervisor restarted a dead worker
 * before this one was forked (0 in the first worker, and without a
 * supervisor). */
uint64_t sp_daemon_restarts(void);

/* The signals a worker waits for: SIGTERM, SIGINT, SIGHUP. */
void sp_daemon_signals(sigset_t *set);
/* Block them in the calling thread (threads started later inherit it). */
void sp_daemon_block_signals(void);
/* Wait for one of them (sigwait); returns the signal number. */
int sp_daemon_wait_signal(void);

/* Whether sp_daemon_run could keep its pid file at `path` (relative: from
 * the current directory), as far as can be told before it runs, for a
 * configuration check: 0; -EISDIR when it is a directory; else why its
 * directory can neither be used nor created (one missing level is
 * created: -ENOENT when the one above is missing too, -ENOTDIR, -EACCES,
 * -ENAMETOOLONG...). The file's own checks (no symbolic link, ours, a
 * safe directory) are made when it is opened. */
int sp_daemon_pid_file_check(const char *path);

/* The pid written in a pid file, or -1 (no file, no valid pid). Not for
 * the process holding the file: closing any descriptor of a file drops
 * that process's fcntl locks on it. */
long sp_daemon_read_pid(const char *pid_file);

#ifdef __cplusplus
}
#endif
#endif
