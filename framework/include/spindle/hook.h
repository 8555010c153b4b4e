/* spindle syscall hooks: blocking calls become cooperative.
 *
 * Inside a task fiber of an IOManager worker, the hooked libc calls (read,
 * write, connect, accept, sleep, poll, getaddrinfo, ... see docs/hooks.md)
 * park the fiber instead of blocking the thread. Everywhere else (plain
 * threads, the scheduler's own context, or with the switch turned off) each
 * hooked call is exactly the libc call.
 *
 * Two ways to get the hooks: link libspindle (hooks included), or link
 * libspindle_nohook and start the program with
 * LD_PRELOAD=libspindle_preload.so. Both behave the same.
 */
#ifndef SPINDLE_HOOK_H
#define SPINDLE_HOOK_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-thread switch, on by default. Turning it off on a worker makes its
 * fibers' calls block the thread like plain libc. */
void sp_hook_enable(bool on);
/* True when a hooked call made here would park the current fiber. */
bool sp_hook_is_enabled(void);

/* Default connect() timeout for hooked sockets, in microseconds (-1 =
 * none). A socket's SO_SNDTIMEO, when set and shorter, wins. Default 75 s,
 * the usual kernel SYN retry budget. */
void sp_hook_set_connect_timeout(int64_t timeout_us);
int64_t sp_hook_connect_timeout(void);

/* Whether hooks are present in this process: linked in, or preloaded and
 * attached by the first IOManager. */
bool sp_hook_available(void);

/* A stdio stream on fd whose reads and writes are the hooked read and
 * write, so that in a fiber fgets, fread, fprintf... park instead of
 * blocking the worker. A stream from glibc's fdopen on a socket does not:
 * glibc reads and writes it with internal calls no hook sees. mode as
 * fdopen's ("r", "w", "r+"...); fclose closes fd. NULL + errno. */
FILE *sp_fdopen(int fd, const char *mode);

#ifdef __cplusplus
}
#endif
#endif
