#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "real.h"

sp__real_t sp__real_table;
atomic_bool sp__real_ready;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *must(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "spindle hooks: no libc symbol '%s'\n", name);
        abort();
    }
    return p;
}

/* POSIX allows converting dlsym's result through a void* object. */
#define LOAD(name) (*(void **)&sp__real_table.name = must(#name))

static void resolve(void)
{
    LOAD(sleep);
    LOAD(usleep);
    LOAD(nanosleep);
    LOAD(clock_nanosleep);
    LOAD(socket);
    LOAD(connect);
    LOAD(accept);
    LOAD(accept4);
    LOAD(read);
    LOAD(readv);
    LOAD(recv);
    LOAD(recvfrom);
    LOAD(recvmsg);
    LOAD(write);
    LOAD(writev);
    LOAD(send);
    LOAD(sendto);
    LOAD(sendmsg);
    LOAD(close);
    LOAD(fcntl);
    LOAD(ioctl);
    LOAD(getsockopt);
    LOAD(setsockopt);
    LOAD(poll);
    LOAD(select);
    LOAD(ppoll);
    LOAD(pselect);
    LOAD(epoll_wait);
    LOAD(sendfile);
    LOAD(splice);
    LOAD(tee);
    LOAD(epoll_pwait);
    LOAD(epoll_pwait2);
    LOAD(dup);
    LOAD(dup2);
    LOAD(dup3);
    LOAD(getaddrinfo);
    LOAD(gethostbyname);
    LOAD(gethostbyname2);
    LOAD(gethostbyaddr);
    LOAD(gethostbyname_r);
    LOAD(gethostbyname2_r);
    LOAD(gethostbyaddr_r);
    LOAD(getnameinfo);
    LOAD(pread);
    LOAD(pwrite);
    LOAD(fsync);
    LOAD(fdatasync);
    LOAD(eventfd);
    LOAD(timerfd_create);
    LOAD(signalfd);
    LOAD(inotify_init);
    LOAD(inotify_init1);
    LOAD(res_query);
    LOAD(res_search);
    LOAD(res_querydomain);
    LOAD(res_nquery);
    LOAD(res_nsearch);
    LOAD(res_nquerydomain);
    atomic_store_explicit(&sp__real_ready, true, memory_order_release);
}

void sp__real_resolve(void)
{
    pthread_once(&once, resolve);
}
