/* Internal: what the hook layer needs from the framework, as a table of
 * function pointers. The hooks linked into libspindle get the table at
 * once; a preloaded libspindle_preload.so gets it when the first IOManager
 * is created (it cannot link against the framework it is loaded into). */
#ifndef SP_HOOK_BRIDGE_H
#define SP_HOOK_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "fd_table.h"
#include "spindle/iomanager.h"

typedef struct sp__hook_bridge {
    bool (*enabled)(void);
    int (*wait_any)(const sp_io_want_t *wants, int n, int64_t timeout_us);
    /* The same for one fd whose context the caller looked up. */
    int (*wait_fd)(sp__fd_ctx_t *ctx, int fd, int event, int64_t timeout_us);
    int (*sleep_us)(uint64_t usec);
    int (*close_fd)(int fd);
    int64_t (*connect_timeout)(void);
    sp__fd_ctx_t *(*fd_ctx)(int fd);
    /* fd's context and its flags (*flags), if the hooks are on for the
     * calling fiber; else NULL. */
    sp__fd_ctx_t *(*fd_active)(int fd, unsigned *flags);
    unsigned (*fd_ctx_load)(sp__fd_ctx_t *c, int fd);
    /* Every change the hooks make to an fd's entry (fd_table.h). */
    int (*fd_adopt)(int fd, unsigned flags);
    void (*fd_set_user_nb)(sp__fd_ctx_t *c, bool on);
    void (*fd_set_timeout)(sp__fd_ctx_t *c, bool reading, int64_t us);
    void (*fd_copy)(sp__fd_ctx_t *to, sp__fd_ctx_t *from, unsigned flags);
    bool (*fd_make_nonblocking)(sp__fd_ctx_t *c, int fd);
    int (*run_blocking)(void (*fn)(void *), void *arg);
} sp__hook_bridge_t;

/* Defined by the hook layer: hand it the framework's table. */
void sp_hook_attach(const sp__hook_bridge_t *b);
/* Defined by the hook layer: whether it has a table. */
bool sp_hook_attached(void);

/* Framework side: make the hooks (linked or preloaded) see the bridge. */
void sp__hook_connect(void);

#endif
