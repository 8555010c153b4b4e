/* Internal: per-fd context, indexed by fd number. Used by the IOManager
 * (armed events) and, through the bridge's functions (hook_bridge.h), by
 * the hooks (socket flags, timeouts). Entries are allocated in chunks on
 * first use and never move or go away, so a pointer to one stays valid.
 * `flags` and the timeouts may be read without the lock (the hooks' fast
 * path); every change happens under `lock`. */
#ifndef SP_FD_TABLE_H
#define SP_FD_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/spin.h"
#include "hook_bridge.h" /* the SP_FD_* bits */

struct sp__io_watch;

/* One cache line each: a wait touches its fd's entry once per message.
 * `lock` guards the flags' changes and, with the watch lock (io_watch.h),
 * the armed events. */
typedef struct sp__fd_ctx {
    _Alignas(64)
    sp__spin_t lock;
    _Atomic unsigned flags;
    /* The last read was short: wait before reading. A hint kept apart from
     * `flags` so that setting it costs a plain store, not a locked RMW. */
    _Atomic bool drained;
    /* Per direction, the watch lock's state (io_watch.h): the watch's
     * home thread is in a critical section without `lock`; another thread
     * holding `lock` wants the watch. */
    _Atomic bool home_busy[2], remote[2];
    _Atomic int64_t rcv_timeout_us, snd_timeout_us; /* -1 = none */
    _Atomic(struct sp__io_watch *) watch[2]; /* READ / WRITE watch, or NULL */
    uint32_t wait_seq[2];         /* numbers each armed event */
    /* The token of the thread that made the watch (its owner's), which
     * may take the watch lock's fast side; 0: none. */
    _Atomic uint32_t home[2];
} sp__fd_ctx_t;

/* The fd's SO_RCVTIMEO (reading) or SO_SNDTIMEO in us; -1 = none. */
static inline int64_t sp__fd_timeout_us(sp__fd_ctx_t *c, bool reading)
{
    return atomic_load_explicit(reading ? &c->rcv_timeout_us : &c->snd_timeout_us,
                                memory_order_relaxed);
}

/* The entry for fd (allocated on first use), or NULL for fd < 0, an fd past
 * the table's limit, or out of memory. */
sp__fd_ctx_t *sp__fd_ctx(int fd);

/* The table itself, for the inline lookup below; set up by the first
 * sp__fd_ctx() call. sp__fd_nchunks is 0 until sp__fd_chunks is set
 * (stored with release after it), so one load tells both. */
enum { SP_FD_CHUNK_SHIFT = 10, SP_FD_CHUNK = 1 << SP_FD_CHUNK_SHIFT };
extern _Atomic(sp__fd_ctx_t *) *sp__fd_chunks;
extern _Atomic size_t sp__fd_nchunks;

/* sp__fd_ctx() for an fd whose chunk exists (every fd the process has
 * used), in a few instructions; NULL otherwise: call sp__fd_ctx(). A
 * negative fd is a huge unsigned one, past any table. */
static inline sp__fd_ctx_t *sp__fd_ctx_known(int fd)
{
    size_t n = atomic_load_explicit(&sp__fd_nchunks, memory_order_acquire);
    if (((unsigned)fd >> SP_FD_CHUNK_SHIFT) >= n)
        return NULL;
    sp__fd_ctx_t *chunk = atomic_load_explicit(&sp__fd_chunks[fd >> SP_FD_CHUNK_SHIFT],
                                              memory_order_acquire);
    return chunk ? &chunk[fd & (SP_FD_CHUNK - 1)] : NULL;
}
/* sp__fd_ctx(), inline for an fd the process has used before. */
static inline sp__fd_ctx_t *sp__fd_ctx_get(int fd)
{
    sp__fd_ctx_t *c = sp__fd_ctx_known(fd);
    return c ? c : sp__fd_ctx(fd);
}
/* The entry's flags, read from the kernel first unless already valid.
 * Takes the lock only on that first read. */
unsigned sp__fd_ctx_load(sp__fd_ctx_t *c, int fd);
/* With the lock held: forget what we know (the fd number was closed). */
void sp__fd_ctx_forget(sp__fd_ctx_t *c);
/* A new fd of ours, non-blocking underneath: its entry starts afresh as
 * managed with `flags` (SP_FD_STREAM, SP_FD_USER_NB: the user's view). The
 * one way a new fd is adopted: the hooks (socket, accept, eventfd...) and
 * the TCP server's acceptor all call it. 0 or -EBADF. */
int sp__fd_adopt(int fd, unsigned flags);
/* One flag of the entry set or cleared under its lock (SP_FD_MANAGED for
 * sp_hook_adopt_fd, SP_FD_OFFLOAD). An fd given back (sp_hook_release_fd):
 * not managed, and O_NONBLOCK cleared again unless the user set it. */
void sp__fd_set_flag(sp__fd_ctx_t *c, unsigned flag, bool on);
/* Forget what the entry says and read the fd's kind from the kernel. */
unsigned sp__fd_refresh(sp__fd_ctx_t *c, int fd);
int sp__fd_release(sp__fd_ctx_t *c, int fd);
/* sp_hook_set_file_offload(SP_HOOK_ALL_FILES, ...) is on (fd_offload.c). */
bool sp__file_offload_all(void);
/* The other changes the hooks make to an entry, each under its lock: the
 * user's O_NONBLOCK view (fcntl, ioctl FIONBIO); a hooked wait's timeout
 * (SO_RCVTIMEO/SO_SNDTIMEO; <= 0: none); what a dup'ed fd shares with its
 * original (its flags as given, and the timeouts); and a socket from
 * outside made non-blocking underneath (false if fcntl failed). The
 * framework reaches the kernel on fds the hooks must not see with raw
 * syscall(2), as here. */
void sp__fd_set_user_nb(sp__fd_ctx_t *c, bool on);
void sp__fd_set_timeout(sp__fd_ctx_t *c, bool reading, int64_t us);
void sp__fd_copy(sp__fd_ctx_t *to, sp__fd_ctx_t *from, unsigned flags);
bool sp__fd_make_nonblocking(sp__fd_ctx_t *c, int fd);

/* The entry for fd with its flags in *flags (read from the kernel on the
 * entry's first use), or NULL as for sp__fd_ctx(). */
static inline sp__fd_ctx_t *sp__fd_ctx_flags(int fd, unsigned *flags)
{
    sp__fd_ctx_t *c = sp__fd_ctx_get(fd);
    if (!c)
        return NULL;
    unsigned fl = atomic_load_explicit(&c->flags, memory_order_acquire);
    *flags = fl & SP_FD_VALID ? fl : sp__fd_ctx_load(c, fd);
    return c;
}

#endif
