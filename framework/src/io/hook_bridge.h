/* Internal: what the hook layer needs from the framework, as a table of
 * function pointers. The hooks linked into libspindle get the table at
 * once; a preloaded libspindle_preload.so gets it when the first IOManager
 * is created (it cannot link against the framework it is loaded into).
 * The three calls of the per-message path go through sp__bridge_*() below:
 * the hooks linked into libspindle are compiled with SP_HOOK_DIRECT and
 * make them directly, inline where they are small, so that a hooked read
 * or write on a socket is one function deep; the preload library, which
 * shares no struct layout with the framework, calls through the table. */
#ifndef SP_HOOK_BRIDGE_H
#define SP_HOOK_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "spindle/iomanager.h"

/* What the fd table knows of an fd, as bits (fd_active reports them). */
enum sp_fd_flag {
    SP_FD_VALID = 1,    /* the flags describe the fd that has this number */
    SP_FD_MANAGED = 2,  /* the hooks manage it: a socket; an eventfd, timerfd,
                           signalfd or inotify fd made in a fiber; an fd
                           given to sp_hook_adopt_fd */
    SP_FD_SYS_NB = 4,   /* O_NONBLOCK is set on the kernel's file */
    SP_FD_USER_NB = 8,  /* O_NONBLOCK as the user set it and sees it */
    SP_FD_STREAM = 16,  /* a stream socket: a short read drained it */
    /* Not stored with the others: the entry's drained hint (its last read
     * was short), reported by the bridge's fd_active. */
    SP_FD_DRAINED = 32,
    SP_FD_FILE = 64,    /* a regular file or block device: never "not ready" */
    SP_FD_OFFLOAD = 128 /* its calls go to the helper pool (file offload) */
};

/* An fd's entry in the fd table. The hooks hold pointers to it and never
 * see inside: every read and change goes through the table below, so the
 * preload library and the framework share no struct layout. */
typedef struct sp__fd_ctx sp__fd_ctx_t;

/* wait_fd's deadline when the call has not waited yet: take it from the
 * fd's SO_RCVTIMEO / SO_SNDTIMEO. */
#define SP_HOOK_FD_DEADLINE UINT64_MAX
/* wait_fd's answer -(SP_HOOK_INTERRUPTED + err): sp_fiber_interrupt(f,
 * err) ended the wait, and the call fails with errno = err as it is. */
#define SP_HOOK_INTERRUPTED 0x10000

typedef struct sp__hook_bridge {
    bool (*enabled)(void);
    /* sp_io_wait_any; an interrupt's answer as wait_fd's below. */
    int (*wait_any)(const sp_io_want_t *wants, int n, int64_t timeout_us);
    /* Park until fd (entry c) is ready for `event` or *deadline_ns
     * (absolute, CLOCK_MONOTONIC ns; 0 = none) passes. SP_HOOK_FD_DEADLINE
     * asks for the fd's own timeout in that direction, and the deadline it
     * gives is stored back, so a call's later waits keep it. A wait for
     * READ consumes the drained hint. 0 = ready, else a negative errno:
     * -ETIMEDOUT, -ECANCELED, -EEXIST (the direction has a waiter), ...,
     * or an interrupt (SP_HOOK_INTERRUPTED). */
    int (*wait_fd)(sp__fd_ctx_t *c, int fd, int event, uint64_t *deadline_ns);
    int (*sleep_us)(uint64_t usec);
    int (*close_fd)(int fd);
    int64_t (*connect_timeout)(void);
    sp__fd_ctx_t *(*fd_ctx)(int fd);
    /* fd's entry and its flags (*flags, SP_FD_DRAINED included), if the
     * hooks are on for the calling fiber; else NULL. `reading`: the call
     * may wait for input next (the wait's lines are asked for). */
    sp__fd_ctx_t *(*fd_active)(int fd, bool reading, unsigned *flags);
    unsigned (*fd_ctx_load)(sp__fd_ctx_t *c, int fd);
    unsigned (*fd_flags)(sp__fd_ctx_t *c); /* as known, without asking the kernel */
    /* The fd's SO_RCVTIMEO (reading) or SO_SNDTIMEO in us; -1 = none. */
    int64_t (*fd_timeout)(sp__fd_ctx_t *c, bool reading);
    /* Every change the hooks make to an fd's entry (fd_table.h). */
    void (*fd_set_drained)(sp__fd_ctx_t *c);
    int (*fd_adopt)(int fd, unsigned flags);
    void (*fd_set_user_nb)(sp__fd_ctx_t *c, bool on);
    void (*fd_set_timeout)(sp__fd_ctx_t *c, bool reading, int64_t us);
    void (*fd_copy)(sp__fd_ctx_t *to, sp__fd_ctx_t *from, unsigned flags);
    bool (*fd_make_nonblocking)(sp__fd_ctx_t *c, int fd);
    /* sp_run_blocking; when an interrupt or a deadline ended the wait,
     * -(SP_HOOK_INTERRUPTED + err): fn still runs, after the call. */
    int (*run_blocking)(void (*fn)(void *), void *arg);
    /* Keep p (freed with free_fn) for the calling fiber until it keeps
     * another or ends: the per-fiber result of a non-reentrant call. */
    void (*fiber_keep)(void *p, void (*free_fn)(void *));
    /* sp_hook_set_file_offload(SP_HOOK_ALL_FILES, ...) is on. */
    bool (*file_offload_all)(void);
} sp__hook_bridge_t;

#ifdef SP_HOOK_DIRECT
#include "hook_fast.h"
#endif

/* b->fd_active(fd, reading, flags). */
static inline sp__fd_ctx_t *sp__bridge_fd_active(const sp__hook_bridge_t *b, int fd,
                                                bool reading, unsigned *flags)
{
#ifdef SP_HOOK_DIRECT
    (void)b;
    return sp__hook_fd_active(fd, reading, flags);
#else
    return b->fd_active(fd, reading, flags);
#endif
}

/* b->wait_fd(c, fd, event, deadline_ns). */
static inline int sp__bridge_wait_fd(const sp__hook_bridge_t *b, sp__fd_ctx_t *c, int fd,
                                     int event, uint64_t *deadline_ns)
{
#ifdef SP_HOOK_DIRECT
    (void)b;
    return sp__io_hook_wait(c, fd, event, deadline_ns);
#else
    return b->wait_fd(c, fd, event, deadline_ns);
#endif
}

/* b->fd_set_drained(c). */
static inline void sp__bridge_set_drained(const sp__hook_bridge_t *b, sp__fd_ctx_t *c)
{
#ifdef SP_HOOK_DIRECT
    (void)b;
    sp__hook_fd_set_drained(c);
#else
    b->fd_set_drained(c);
#endif
}

/* Defined by the hook layer: hand it the framework's table. */
void sp_hook_attach(const sp__hook_bridge_t *b);
/* Defined by the hook layer: whether it has a table. */
bool sp_hook_attached(void);

/* Framework side: make the hooks (linked or preloaded) see the bridge. */
void sp__hook_connect(void);

#endif
