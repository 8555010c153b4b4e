/* Fiber stack pool.
 *
 * Guard regions: Linux >= 6.13 has MADV_GUARD_INSTALL, which marks pages as
 * faulting inside an existing mapping without splitting it into separate
 * VMAs. With it a million stacks cost a few thousand VMAs, well under the
 * default vm.max_map_count of 65530. On older kernels we fall back to
 * mprotect(PROT_NONE), which splits every stack into two VMAs and so caps a
 * process at about 32,000 live stacks.
 *
 * A slab's guards are installed, and the top page of each of its stacks
 * committed, with one process_madvise() call each where the kernel takes
 * it (Linux >= 6.13 accepts any advice for the caller's own process). A
 * fiber writes its top page when it is created, so a burst of new
 * connections otherwise takes one page fault per fiber: a kernel entry
 * each, costly on a VM whose hypervisor handles guest faults, and far
 * more than a page committed in a batch (bench/peers.sh http-burst
 * measures a burst of new connections). The cost is one page per stack
 * of the slab that is not used yet (at most 252 KiB).
 *
 * Guard size: code built with -fstack-clash-protection probes every page
 * a frame grows by (GCC on AArch64 assumes a 64 KiB guard and probes every
 * 64 KiB), so 64 KiB catches it at any frame size; code built without
 * the flag jumps a guard with a frame larger than the guard. A guard is
 * not free: MADV_GUARD_INSTALL's markers are page-table entries, so every
 * 2 MiB of stacks, guards included, takes a page-table page (the mprotect
 * fallback costs no page tables). 256 KiB catches unprotected frames up
 * to that size for 0.38 KiB more page tables per parked fiber than 64 KiB
 * (bench parked: 0.76 KiB; 1 MiB would take 2.26 KiB and triple the cost
 * of a new slab); a recycled stack costs nothing more.
 *
 * High-water mark (sp__stack_used): read on demand from the pages the
 * kernel holds committed, so it costs nothing until asked. A pooled stack
 * is not reset (that would take a system call per fiber), so it shows the
 * deepest use by any fiber that had the stack.
 *
 * Pool: free stacks of one size are kept in a per-thread cache (no locks on
 * the hot path) in front of a global array. The free lists live outside the
 * stacks, so a stack returned beyond SP_POOL_HOT global entries gives all
 * its pages back to the kernel (MADV_DONTNEED): a burst of fibers does not
 * pin its peak memory forever.
 */
#include "stack.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifdef SP_VALGRIND
#include <valgrind/valgrind.h>
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum {
    SP_GUARD_BYTES = 256 * 1024, /* see "Guard size" above */
    SP_SLAB_STACKS = 64,        /* stacks carved from one mapping */
    SP_CLASSES = 8,             /* distinct pooled sizes */
    SP_THREAD_CACHE = 64,       /* per-thread cached stacks per size */
    SP_POOL_HOT = 1024          /* global stacks kept with their pages */
};

typedef struct size_class {
    size_t total; /* 0 = unused slot */
    char **free;  /* global free stacks (their lo) */
    size_t count, cap;
} size_class_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static size_class_t classes[SP_CLASSES];

typedef struct thread_cache {
    size_t total[SP_CLASSES];
    char *free[SP_CLASSES][SP_THREAD_CACHE];
    unsigned count[SP_CLASSES];
} thread_cache_t;

/* A pointer, so the library's thread-local block stays small (see
 * thread.c: static TLS). Allocated at a thread's first pooled stack. */
static _Thread_local thread_cache_t *cache;
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

/* Our own process as a pidfd for process_madvise(), opened once per slab
 * for its two batch calls; -1 where there is none (no such call here, or
 * valgrind 3.19, which knows neither and warns). errno is left as it was. */
static int self_pidfd(void)
{
#ifdef SP_VALGRIND
    if (RUNNING_ON_VALGRIND)
        return -1;
#endif
#if defined(SYS_pidfd_open) && defined(SYS_process_madvise)
    int saved = errno;
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    errno = saved;
    return fd;
#else
    return -1;
#endif
}

static void close_pidfd(int pidfd)
{
    if (pidfd >= 0)
        syscall(SYS_close, pidfd); /* raw: not a hooked fd */
}

/* One process_madvise() for all of v[0..n): true only if the kernel
 * applied it to every byte (older kernels refuse most advice, qemu-user
 * does not know the call). errno is left as it was. */
static bool madvise_ranges(int pidfd, const struct iovec *v, size_t n, int advice)
{
    if (pidfd < 0)
        return false;
#ifdef SYS_process_madvise
    int saved = errno;
    size_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += v[i].iov_len;
    long done = syscall(SYS_process_madvise, pidfd, v, n, advice, 0);
    errno = saved;
    return done >= 0 && (size_t)done == want;
#else
    (void)v, (void)n, (void)advice;
    return false;
#endif
}

static bool madvise_guards(int pidfd, const struct iovec *v, size_t n)
{
    if (madvise_ranges(pidfd, v, n, MADV_GUARD_INSTALL))
        return true;
    for (size_t i = 0; i < n; i++)
        if (madvise(v[i].iov_base, v[i].iov_len, MADV_GUARD_INSTALL) != 0)
            return false;
    return true;
}

/* Guard regions at the bottom of n stacks of `total` bytes from `base`
 * (pidfd: see self_pidfd; -1 for one call per stack). */
static void install_guards(int pidfd, char *base, size_t total, size_t n)
{
    static _Atomic int madv_guard; /* 0 untested, 1 works, -1 not usable */
    struct iovec v[SP_SLAB_STACKS];
    for (size_t i = 0; i < n; i++)
        v[i] = (struct iovec){.iov_base = base + i * total, .iov_len = SP_GUARD_BYTES};
    if (madv_guard >= 0 && madvise_guards(pidfd, v, n)) {
        if (madv_guard == 1)
            return;
        int saved = errno;
        bool ok = faults(base) && faults(base + SP_GUARD_BYTES - 1);
        errno = saved;
        madv_guard = ok ? 1 : -1;
        if (ok)
            return;
    } else {
        madv_guard = -1;
    }
    for (size_t i = 0; i < n; i++)
        if (mprotect(v[i].iov_base, SP_GUARD_BYTES, PROT_NONE) != 0)
            abort(); /* only fails for bad arguments */
}

/* Best effort: where the batch call is refused, each fiber's first write
 * commits its page as before. */
static void commit_tops(int pidfd, char *base, size_t total, size_t n)
{
    size_t ps = page_size();
    struct iovec v[SP_SLAB_STACKS];
    for (size_t i = 0; i < n; i++)
        v[i] = (struct iovec){.iov_base = base + (i + 1) * total - ps, .iov_len = ps};
    madvise_ranges(pidfd, v, n, MADV_POPULATE_WRITE);
}

/* Lock held. Append to the class's global array; false if it cannot grow. */
static bool global_push(size_class_t *c, char *lo)
{
    if (c->count == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        char **f = realloc(c->free, cap * sizeof *f);
        if (!f)
            return false;
        c->free = f;
        c->cap = cap;
    }
    c->free[c->count++] = lo;
    return true;
}

/* Map a slab of stacks of one size, return the first and put the rest in
 * the global array of class c (lock held). */
static char *map_slab(size_class_t *c)
{
    char *base = mmap(NULL, c->total * SP_SLAB_STACKS, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    int pidfd = self_pidfd();
    install_guards(pidfd, base, c->total, SP_SLAB_STACKS);
    commit_tops(pidfd, base, c->total, SP_SLAB_STACKS);
    close_pidfd(pidfd);
    for (size_t i = 0; i < SP_SLAB_STACKS; i++) {
        char *lo = base + i * c->total;
#ifdef SP_VALGRIND
        VALGRIND_STACK_REGISTER(lo + SP_GUARD_BYTES, lo + c->total);
#endif
        if (i > 0 && !global_push(c, lo))
            break; /* the rest of the slab stays unused */
    }
    return base;
}

static void flush_cache(void *p)
{
    thread_cache_t *c = p;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < SP_CLASSES; i++)
        while (c->count[i] && global_push(&classes[i], c->free[i][c->count[i] - 1]))
            c->count[i]--;
    pthread_mutex_unlock(&pool_lock);
    cache = NULL;
    free(c);
}

static void make_key(void)
{
    if (pthread_key_create(&cache_key, flush_cache) != 0)
        abort();
}

/* Index of the class for `total` (same in the thread cache and the global
 * table), creating it; -1 when all classes are taken (not pooled). */
static int class_index(size_t total)
{
    if (!cache) {
        pthread_once(&cache_once, make_key);
        if (!(cache = calloc(1, sizeof *cache)))
            return -1; /* no memory: this stack is not pooled */
        pthread_setspecific(cache_key, cache); /* flush at thread exit */
    }
    for (int i = 0; i < SP_CLASSES; i++)
        if (cache->total[i] == total)
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
    cache->total[g] = total;
    return g;
}

int sp__stack_get(sp__stack_t *st, size_t usable)
{
    size_t ps = page_size();
    size_t total = SP_GUARD_BYTES + ((usable + ps - 1) & ~(ps - 1));
    int i = class_index(total);
    char *lo = NULL;
    if (i < 0) {
        lo = mmap(NULL, total, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (lo == MAP_FAILED)
            return -ENOMEM;
        install_guards(-1, lo, total, 1);
    } else if (cache->count[i]) {
        lo = cache->free[i][--cache->count[i]];
    } else {
        size_class_t *c = &classes[i];
        pthread_mutex_lock(&pool_lock);
        lo = c->count ? c->free[--c->count] : map_slab(c);
        pthread_mutex_unlock(&pool_lock);
        if (!lo)
            return -ENOMEM;
    }
    st->lo = lo;
    st->total = total;
    st->guard = SP_GUARD_BYTES;
    return 0;
}

size_t sp__stack_used(const sp__stack_t *st, const char *top)
{
    size_t ps = page_size();
    const char *lo = st->lo + st->guard;
    size_t pages = (size_t)(top - lo + (ptrdiff_t)ps - 1) / ps;
    unsigned char v[256];
    for (size_t at = 0; at < pages; at += sizeof v) {
        size_t n = pages - at < sizeof v ? pages - at : sizeof v;
        if (mincore((void *)(lo + at * ps), n * ps, v) != 0)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (v[i] & 1)
                return (size_t)(top - (lo + (at + i) * ps));
    }
    return 0;
}

void sp__stack_put(const sp__stack_t *st)
{
    int i = class_index(st->total);
    if (i >= 0 && cache->count[i] < SP_THREAD_CACHE) {
        cache->free[i][cache->count[i]++] = st->lo;
        return;
    }
    if (i >= 0) {
        size_class_t *c = &classes[i];
        pthread_mutex_lock(&pool_lock);
        bool cold = c->count >= SP_POOL_HOT;
        pthread_mutex_unlock(&pool_lock);
        if (cold) /* keep the address range, give the memory back */
            madvise(st->lo + st->guard, st->total - st->guard, MADV_DONTNEED);
        pthread_mutex_lock(&pool_lock);
        bool kept = global_push(c, st->lo);
        pthread_mutex_unlock(&pool_lock);
        if (kept)
            return;
    }
    munmap(st->lo, st->total);
}
