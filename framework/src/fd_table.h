/* Internal: per-fd context, indexed by fd number. Shared by the IOManager
 * (waiters) and the hooks (socket flags, timeouts). Entries are allocated in
 * chunks on first use and never move or go away, so a pointer to one stays
 * valid; everything inside is guarded by the entry's lock. */
#ifndef SP_FD_TABLE_H
#define SP_FD_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct sp_io_watch;

typedef struct sp_fd_ctx {
    pthread_mutex_t lock;
    bool valid;         /* fields below describe the current fd */
    bool is_socket;
    bool sys_nonblock;  /* O_NONBLOCK is set on the kernel's file */
    bool user_nonblock; /* O_NONBLOCK as the user set or sees it */
    int64_t rcv_timeout_us, snd_timeout_us; /* -1 = none */
    struct sp_io_watch *watch[2]; /* armed READ / WRITE event, or NULL */
    uint32_t wait_seq[2];         /* numbers each armed event */
} sp_fd_ctx_t;

/* The entry for fd (allocated on first use), or NULL for fd < 0, an fd past
 * the table's limit, or out of memory. */
sp_fd_ctx_t *sp__fd_ctx(int fd);
/* With the lock held: read the fd's kind and flags from the kernel unless
 * already valid. */
void sp__fd_ctx_load(sp_fd_ctx_t *c, int fd);
/* With the lock held: forget what we know (the fd number was closed). */
void sp__fd_ctx_forget(sp_fd_ctx_t *c);

#endif
