/* Fiber stack pool.
 *
 * Guard regions: Linux >= 6.13 has MADV_GUARD_INSTALL, which marks pages as
 * faulting inside an existing mapping without splitting it into separate
 * VMAs. With it a million stacks cost a few thousand VMAs, well under the
 * default vm.max_map_count of 65530. On older kernels we fall back to
 * mprotect(PROT_NONE), which splits every stack into two VMAs and so caps a
 * process at about 32,000 live stacks.
 *
 * Pool: stacks of equal size are kept on a per-thread free list (no locks on
 * the hot path) in front of a global one. Stacks beyond SP_POOL_HOT in the
 * global list give their pages back to the kernel (MADV_DONTNEED), so a burst
 * of fibers does not pin its peak memory forever.
 */
#include "stack.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SP_VALGRIND
#include <valgrind/valgrind.h>
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

enum {
    SP_GUARD_BYTES = 64 * 1024, /* large frames may skip a single page */
    SP_SLAB_STACKS = 64,        /* stacks carved from one mapping */
    SP_CLASSES = 8,             /* distinct pooled sizes */
    SP_THREAD_CACHE = 64,       /* per-thread cached stacks per size */
    SP_POOL_HOT = 1024          /* global stacks kept with their pages */
};

/* A free stack stores the list link in its own (usable) top bytes. */
typedef struct free_stack {
    struct free_stack *next;
    size_t guard;
} free_stack_t;

typedef struct size_class {
    size_t total;       /* 0 = unused slot */
    free_stack_t *head; /* global free list */
    size_t count;
} size_class_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static size_class_t classes[SP_CLASSES];

typedef struct thread_cache {
    size_t total[SP_CLASSES];
    free_stack_t *head[SP_CLASSES];
    unsigned count[SP_CLASSES];
} thread_cache_t;

static _Thread_local thread_cache_t cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static size_t page_size(void)
{
    static _Atomic size_t ps;
    size_t v = ps;
    if (!v)
        ps = v = (size_t)sysconf(_SC_PAGESIZE);
    return v;
}

size_t sp__stack_guard_size(void)
{
    return SP_GUARD_BYTES;
}

static free_stack_t *link_of(char *lo, size_t total)
{
    return (free_stack_t *)(lo + total) - 1;
}

static char *lo_of(free_stack_t *fs, size_t total)
{
    return (char *)(fs + 1) - total;
}

/* True if the kernel refuses to read `p`. qemu-user (7.2) answers every
 * madvise() with success and does nothing, so the first guard installed with
 * MADV_GUARD_INSTALL is checked once: a real guard region makes the kernel's
 * own read of it fail with EFAULT. Raw system calls, so neither our syscall
 * hooks nor a sanitizer's interceptors see the probe. */
static bool faults(const char *p)
{
    int fd[2];
    if (syscall(SYS_pipe2, fd, O_CLOEXEC) != 0)
        return false; /* cannot tell: take the mprotect path */
    bool fault = syscall(SYS_write, fd[1], p, 1) < 0 && errno == EFAULT;
    syscall(SYS_close, fd[0]);
    syscall(SYS_close, fd[1]);
    return fault;
}

static void install_guard(char *lo, size_t guard)
{
    static _Atomic int madv_guard; /* 0 untested, 1 works, -1 not usable */
    if (madv_guard >= 0 && madvise(lo, guard, MADV_GUARD_INSTALL) == 0) {
        if (madv_guard == 1)
            return;
        int saved = errno;
        bool ok = faults(lo) && faults(lo + guard - 1);
        errno = saved;
        madv_guard = ok ? 1 : -1;
        if (ok)
            return;
    } else {
        madv_guard = -1;
    }
    if (mprotect(lo, guard, PROT_NONE) != 0)
        abort(); /* only fails for bad arguments */
}

/* Map a slab of stacks of one size and push all but the first onto the
 * global list of class c (lock held). */
static int map_slab(size_class_t *c, sp_stack_t *out)
{
    size_t n = SP_SLAB_STACKS;
    char *base = mmap(NULL, c->total * n, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char *lo = base + i * c->total;
        install_guard(lo, SP_GUARD_BYTES);
#ifdef SP_VALGRIND
        VALGRIND_STACK_REGISTER(lo + SP_GUARD_BYTES, lo + c->total);
#endif
        if (i == 0)
            continue;
        free_stack_t *fs = link_of(lo, c->total);
        fs->guard = SP_GUARD_BYTES;
        fs->next = c->head;
        c->head = fs;
        c->count++;
    }
    out->lo = base;
    out->total = c->total;
    out->guard = SP_GUARD_BYTES;
    return 0;
}

static void flush_cache(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < SP_CLASSES; i++) {
        while (cache.head[i]) {
            free_stack_t *fs = cache.head[i];
            cache.head[i] = fs->next;
            for (int k = 0; k < SP_CLASSES; k++) {
                if (classes[k].total == cache.total[i]) {
                    fs->next = classes[k].head;
                    classes[k].head = fs;
                    classes[k].count++;
                    break;
                }
            }
        }
        cache.count[i] = 0;
    }
    pthread_mutex_unlock(&pool_lock);
}

static void make_key(void)
{
    if (pthread_key_create(&cache_key, flush_cache) != 0)
        abort();
}

/* Index of the class for `total` in the thread cache and global table,
 * creating it; -1 when all classes are taken (the stack is not pooled). */
static int class_index(size_t total)
{
    for (int i = 0; i < SP_CLASSES; i++)
        if (cache.total[i] == total)
            return i;
    pthread_mutex_lock(&pool_lock);
    int g = -1;
    for (int i = 0; i < SP_CLASSES && g < 0; i++) {
        if (classes[i].total == total)
            g = i;
        else if (classes[i].total == 0) {
            classes[i].total = total;
            g = i;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    if (g < 0)
        return -1;
    pthread_once(&cache_once, make_key);
    pthread_setspecific(cache_key, &cache); /* flush at thread exit */
    cache.total[g] = total;
    return g;
}

int sp__stack_get(sp_stack_t *st, size_t usable)
{
    size_t ps = page_size();
    size_t total = SP_GUARD_BYTES + ((usable + ps - 1) & ~(ps - 1));
    int i = class_index(total);
    if (i < 0) {
        char *lo = mmap(NULL, total, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (lo == MAP_FAILED)
            return -ENOMEM;
        install_guard(lo, SP_GUARD_BYTES);
        st->lo = lo;
        st->total = total;
        st->guard = SP_GUARD_BYTES;
        return 0;
    }
    free_stack_t *fs = cache.head[i];
    if (fs) {
        cache.head[i] = fs->next;
        cache.count[i]--;
    } else {
        size_class_t *c = &classes[i];
        pthread_mutex_lock(&pool_lock);
        fs = c->head;
        if (fs) {
            c->head = fs->next;
            c->count--;
        } else {
            int rc = map_slab(c, st);
            pthread_mutex_unlock(&pool_lock);
            return rc;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    st->lo = lo_of(fs, total);
    st->total = total;
    st->guard = SP_GUARD_BYTES;
    return 0;
}

void sp__stack_put(const sp_stack_t *st)
{
    int i = class_index(st->total);
    if (i < 0) {
        munmap(st->lo, st->total);
        return;
    }
    free_stack_t *fs = link_of(st->lo, st->total);
    fs->guard = st->guard;
    if (cache.count[i] < SP_THREAD_CACHE) {
        fs->next = cache.head[i];
        cache.head[i] = fs;
        cache.count[i]++;
        return;
    }
    size_class_t *c = &classes[i];
    pthread_mutex_lock(&pool_lock);
    bool cold = c->count >= SP_POOL_HOT;
    pthread_mutex_unlock(&pool_lock);
    if (cold) /* keep the top page: it holds the free-list link */
        madvise(st->lo + st->guard, st->total - st->guard - page_size(),
                MADV_DONTNEED);
    pthread_mutex_lock(&pool_lock);
    fs->next = c->head;
    c->head = fs;
    c->count++;
    pthread_mutex_unlock(&pool_lock);
}
