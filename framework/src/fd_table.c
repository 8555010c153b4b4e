/* Flat fd table in two levels: a fixed array of chunk pointers sized for
 * the largest fd the process may ever have, and chunks of entries allocated
 * when an fd in their range is first used. Lookups take no lock. */
#include "fd_table.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

enum { CHUNK_SHIFT = 10, CHUNK = 1 << CHUNK_SHIFT };

static _Atomic(sp_fd_ctx_t *) *chunks;
static size_t nchunks;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    /* Enough chunks for the hard fd limit (a soft limit can be raised up to
     * it at run time), at least 1M fds. */
    struct rlimit rl;
    size_t max = 1u << 20;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
        rl.rlim_max > max)
        max = (size_t)rl.rlim_max;
    nchunks = (max + CHUNK - 1) / CHUNK;
    chunks = calloc(nchunks, sizeof *chunks);
    if (!chunks)
        nchunks = 0;
}

static sp_fd_ctx_t *new_chunk(void)
{
    sp_fd_ctx_t *c = calloc(CHUNK, sizeof *c);
    if (!c)
        return NULL;
    for (int i = 0; i < CHUNK; i++) {
        pthread_mutex_init(&c[i].lock, NULL);
        sp__fd_ctx_forget(&c[i]);
    }
    return c;
}

sp_fd_ctx_t *sp__fd_ctx(int fd)
{
    pthread_once(&once, table_init);
    if (fd < 0 || (size_t)(fd >> CHUNK_SHIFT) >= nchunks)
        return NULL;
    _Atomic(sp_fd_ctx_t *) *slot = &chunks[fd >> CHUNK_SHIFT];
    sp_fd_ctx_t *chunk = atomic_load_explicit(slot, memory_order_acquire);
    if (!chunk) {
        sp_fd_ctx_t *fresh = new_chunk();
        if (!fresh)
            return NULL;
        if (atomic_compare_exchange_strong(slot, &chunk, fresh)) {
            chunk = fresh;
        } else { /* another thread won; use its chunk */
            for (int i = 0; i < CHUNK; i++)
                pthread_mutex_destroy(&fresh[i].lock);
            free(fresh);
        }
    }
    return &chunk[fd & (CHUNK - 1)];
}

void sp__fd_ctx_load(sp_fd_ctx_t *c, int fd)
{
    if (c->valid)
        return;
    struct stat st;
    c->is_socket = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    int fl = fcntl(fd, F_GETFL);
    c->sys_nonblock = fl >= 0 && (fl & O_NONBLOCK);
    c->user_nonblock = c->sys_nonblock;
    c->valid = true;
}

void sp__fd_ctx_forget(sp_fd_ctx_t *c)
{
    c->valid = false;
    c->is_socket = false;
    c->sys_nonblock = false;
    c->user_nonblock = false;
    c->rcv_timeout_us = -1;
    c->snd_timeout_us = -1;
}
