/* Flat fd table in two levels: a fixed array of chunk pointers sized for
 * the largest fd the process may ever have, and chunks of entries allocated
 * when an fd in their range is first used. Lookups take no lock. */
#include "fd_table.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { CHUNK_SHIFT = SP_FD_CHUNK_SHIFT, CHUNK = SP_FD_CHUNK };
_Static_assert(sizeof(sp__fd_ctx_t) == 64, "an fd's entry is one cache line");

_Atomic(sp__fd_ctx_t *) *sp__fd_chunks;
_Atomic size_t sp__fd_nchunks;
static atomic_bool table_ready; /* table_init has run */
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
    size_t n = (max + CHUNK - 1) / CHUNK;
    sp__fd_chunks = calloc(n, sizeof *sp__fd_chunks);
    atomic_store_explicit(&sp__fd_nchunks, sp__fd_chunks ? n : 0, memory_order_release);
    atomic_store_explicit(&table_ready, true, memory_order_release);
}

static sp__fd_ctx_t *new_chunk(void)
{
    sp__fd_ctx_t *c = aligned_alloc(_Alignof(sp__fd_ctx_t), CHUNK * sizeof *c);
    if (!c)
        return NULL;
    memset(c, 0, CHUNK * sizeof *c);
    for (int i = 0; i < CHUNK; i++) {
        sp__spin_init(&c[i].lock);
        sp__fd_ctx_forget(&c[i]);
    }
    return c;
}

sp__fd_ctx_t *sp__fd_ctx(int fd)
{
    if (!atomic_load_explicit(&table_ready, memory_order_acquire))
        pthread_once(&once, table_init);
    if (((unsigned)fd >> CHUNK_SHIFT) >= atomic_load_explicit(&sp__fd_nchunks,
                                                               memory_order_relaxed))
        return NULL;
    _Atomic(sp__fd_ctx_t *) *slot = &sp__fd_chunks[fd >> CHUNK_SHIFT];
    sp__fd_ctx_t *chunk = atomic_load_explicit(slot, memory_order_acquire);
    if (!chunk) {
        sp__fd_ctx_t *fresh = new_chunk();
        if (!fresh)
            return NULL;
        if (atomic_compare_exchange_strong(slot, &chunk, fresh)) {
            chunk = fresh;
        } else { /* another thread won; use its chunk */
            free(fresh);
        }
    }
    return &chunk[fd & (CHUNK - 1)];
}

unsigned sp__fd_ctx_load(sp__fd_ctx_t *c, int fd)
{
    unsigned fl = atomic_load_explicit(&c->flags, memory_order_acquire);
    if (fl & SP_FD_VALID)
        return fl;
    sp__spin_lock(&c->lock);
    fl = atomic_load_explicit(&c->flags, memory_order_relaxed);
    if (!(fl & SP_FD_VALID)) {
        struct stat st;
        fl = SP_FD_VALID;
        if (fstat(fd, &st) != 0)
            st.st_mode = 0;
        if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
            fl |= SP_FD_FILE;
        else if (S_ISSOCK(st.st_mode)) {
            int type = 0;
            socklen_t len = sizeof type;
            fl |= SP_FD_MANAGED;
            if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
                type == SOCK_STREAM)
                fl |= SP_FD_STREAM;
        }
        /* Straight to the kernel: fcntl itself may be hooked. */
        int kfl = (int)syscall(SYS_fcntl, fd, F_GETFL);
        if (kfl >= 0 && (kfl & O_NONBLOCK))
            fl |= SP_FD_SYS_NB | SP_FD_USER_NB;
        atomic_store_explicit(&c->flags, fl, memory_order_release);
    }
    sp__spin_unlock(&c->lock);
    return fl;
}

int sp__fd_adopt(int fd, unsigned flags)
{
    sp__fd_ctx_t *c = sp__fd_ctx(fd);
    if (!c)
        return -EBADF;
    sp__spin_lock(&c->lock);
    sp__fd_ctx_forget(c);
    atomic_store(&c->flags, SP_FD_VALID | SP_FD_MANAGED | SP_FD_SYS_NB | flags);
    sp__spin_unlock(&c->lock);
    return 0;
}

void sp__fd_set_flag(sp__fd_ctx_t *c, unsigned flag, bool on)
{
    sp__spin_lock(&c->lock);
    unsigned fl = atomic_load(&c->flags);
    atomic_store(&c->flags, on ? fl | flag : fl & ~flag);
    sp__spin_unlock(&c->lock);
}

unsigned sp__fd_refresh(sp__fd_ctx_t *c, int fd)
{
    sp__spin_lock(&c->lock);
    sp__fd_ctx_forget(c);
    sp__spin_unlock(&c->lock);
    return sp__fd_ctx_load(c, fd);
}

int sp__fd_release(sp__fd_ctx_t *c, int fd)
{
    int rc = 0;
    sp__spin_lock(&c->lock);
    unsigned fl = atomic_load(&c->flags);
    if ((fl & SP_FD_SYS_NB) && !(fl & SP_FD_USER_NB)) {
        int kfl = (int)syscall(SYS_fcntl, fd, F_GETFL);
        if (kfl < 0 || syscall(SYS_fcntl, fd, F_SETFL, kfl & ~O_NONBLOCK) != 0)
            rc = -errno;
    }
    if (rc == 0)
        atomic_store(&c->flags, fl & ~(unsigned)(SP_FD_MANAGED |
                                                 (fl & SP_FD_USER_NB ? 0 : SP_FD_SYS_NB)));
    sp__spin_unlock(&c->lock);
    return rc;
}

void sp__fd_set_user_nb(sp__fd_ctx_t *c, bool on)
{
    sp__fd_set_flag(c, SP_FD_USER_NB, on);
}

void sp__fd_set_timeout(sp__fd_ctx_t *c, bool reading, int64_t us)
{
    atomic_store(reading ? &c->rcv_timeout_us : &c->snd_timeout_us, us > 0 ? us : -1);
}

void sp__fd_copy(sp__fd_ctx_t *to, sp__fd_ctx_t *from, unsigned flags)
{
    int64_t rcv = atomic_load(&from->rcv_timeout_us);
    int64_t snd = atomic_load(&from->snd_timeout_us);
    sp__spin_lock(&to->lock);
    atomic_store(&to->flags, flags);
    atomic_store(&to->rcv_timeout_us, rcv);
    atomic_store(&to->snd_timeout_us, snd);
    sp__spin_unlock(&to->lock);
}

bool sp__fd_make_nonblocking(sp__fd_ctx_t *c, int fd)
{
    bool ok = true;
    sp__spin_lock(&c->lock);
    unsigned fl = atomic_load(&c->flags);
    if (!(fl & SP_FD_SYS_NB)) {
        int kfl = (int)syscall(SYS_fcntl, fd, F_GETFL);
        ok = kfl >= 0 && syscall(SYS_fcntl, fd, F_SETFL, kfl | O_NONBLOCK) == 0;
        if (ok)
            atomic_store(&c->flags, fl | SP_FD_SYS_NB);
    }
    sp__spin_unlock(&c->lock);
    return ok;
}

void sp__fd_ctx_forget(sp__fd_ctx_t *c)
{
    atomic_store(&c->flags, 0);
    atomic_store_explicit(&c->drained, false, memory_order_relaxed);
    atomic_store(&c->rcv_timeout_us, -1);
    atomic_store(&c->snd_timeout_us, -1);
}
