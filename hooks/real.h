/* The libc functions behind every hook, found with dlsym(RTLD_NEXT) the
 * first time any hook runs (not in a constructor: another library's
 * constructor may call a hooked function before ours would have run). */
#ifndef SP_HOOK_REAL_H
#define SP_HOOK_REAL_H

#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <poll.h>
#include <stddef.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

typedef struct sp__real {
    unsigned (*sleep)(unsigned);
    int (*usleep)(useconds_t);
    int (*nanosleep)(const struct timespec *, struct timespec *);
    int (*clock_nanosleep)(clockid_t, int, const struct timespec *,
                           struct timespec *);
    int (*socket)(int, int, int);
    int (*connect)(int, const struct sockaddr *, socklen_t);
    int (*accept)(int, struct sockaddr *, socklen_t *);
    int (*accept4)(int, struct sockaddr *, socklen_t *, int);
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*readv)(int, const struct iovec *, int);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
                        socklen_t *);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *,
                      socklen_t);
    ssize_t (*sendmsg)(int, const struct msghdr *, int);
    int (*close)(int);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*getsockopt)(int, int, int, void *, socklen_t *);
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                   const sigset_t *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
    ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned);
    ssize_t (*tee)(int, int, size_t, unsigned);
    int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
    int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
                        const sigset_t *);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
                       struct addrinfo **);
    struct hostent *(*gethostbyname)(const char *);
    struct hostent *(*gethostbyname2)(const char *, int);
    struct hostent *(*gethostbyaddr)(const void *, socklen_t, int);
    int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t,
                           struct hostent **, int *);
    int (*gethostbyname2_r)(const char *, int, struct hostent *, char *, size_t,
                            struct hostent **, int *);
    int (*gethostbyaddr_r)(const void *, socklen_t, int, struct hostent *, char *,
                           size_t, struct hostent **, int *);
    int (*getnameinfo)(const struct sockaddr *, socklen_t, char *, socklen_t, char *,
                       socklen_t, int);
    ssize_t (*pread)(int, void *, size_t, off_t);
    ssize_t (*pwrite)(int, const void *, size_t, off_t);
    int (*fsync)(int);
    int (*fdatasync)(int);
    int (*eventfd)(unsigned int, int);
    int (*timerfd_create)(int, int);
    int (*signalfd)(int, const sigset_t *, int);
    int (*inotify_init)(void);
    int (*inotify_init1)(int);
    int (*res_query)(const char *, int, int, unsigned char *, int);
    int (*res_search)(const char *, int, int, unsigned char *, int);
    int (*res_querydomain)(const char *, const char *, int, int, unsigned char *, int);
    int (*res_nquery)(res_state, const char *, int, int, unsigned char *, int);
    int (*res_nsearch)(res_state, const char *, int, int, unsigned char *, int);
    int (*res_nquerydomain)(res_state, const char *, const char *, int, int,
                            unsigned char *, int);
} sp__real_t;

/* The table and whether it is complete. sp__real_resolve fills it once
 * (pthread_once) and then sets the flag with release: a hook that reads
 * the flag set with acquire sees every entry, so after the first call each
 * hooked call pays one load and a test instead of a pthread_once call. */
extern sp__real_t sp__real_table;
extern atomic_bool sp__real_ready;
void sp__real_resolve(void);

/* The table, resolved on first use. Under TSan every call goes through
 * pthread_once: a hook may run inside one of TSan's blocking-call
 * interceptors (its poll calls ours), where TSan skips atomics, so it would
 * not see the flag's release store and would report the entries as raced;
 * pthread_once's own release it does record. */
static inline const sp__real_t *sp__real(void)
{
#ifndef SP_TSAN
    if (atomic_load_explicit(&sp__real_ready, memory_order_acquire))
        return &sp__real_table;
#endif
    sp__real_resolve();
    return &sp__real_table;
}

#endif
