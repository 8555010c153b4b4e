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

/* Make fd cooperative in fibers as a socket is: a pipe, FIFO, terminal or
 * other character device, or an eventfd, timerfd, signalfd or inotify fd
 * made outside a fiber (those made in a fiber are adopted already).
 * O_NONBLOCK is set on the open file underneath while the program still
 * sees the fd as it was; blocking reads, writes and polls on it then park
 * the fiber. O_NONBLOCK is shared by every process holding the same open
 * file (the other end's process of a pipe is not: each end is its own
 * file), so adopt only what this process alone uses, and release an fd
 * before handing it to a child. 0, -EBADF, or -EPERM for a regular file,
 * directory or block device (always ready: they would never park). */
int sp_hook_adopt_fd(int fd);
/* Give fd back: O_NONBLOCK cleared underneath again (unless the program
 * set it), and hooked calls on it are the plain libc calls once more.
 * Works for sockets too. 0 or -errno. */
int sp_hook_release_fd(int fd);

/* Regular files and block devices are always "ready", so a fiber's read
 * or write on one holds its worker for as long as the disk takes. With
 * offload on, a fiber's read, readv, pread, write, writev, pwrite, fsync
 * and fdatasync on such an fd run on the helper pool instead (each on a
 * dup of the fd and a copy of the bytes, so an interrupt returns at once
 * and the helper never touches the caller's buffer afterwards). Off by
 * default: a helper round trip costs more than a page-cache hit. fd: one
 * fd (until it is closed), or SP_HOOK_ALL_FILES for every file fd; either
 * being on turns it on for an fd. 0, -EBADF, or -EPERM for an fd that is
 * not a file. */
#define SP_HOOK_ALL_FILES (-1)
int sp_hook_set_file_offload(int fd, bool on);

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
